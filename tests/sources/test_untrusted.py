"""Untrusted servers: no secret in any error, user headers kept to their origin.

Every error the HTTP and object-store sources raise is walked whole (message,
repr, ``args``, attributes, notes, ``__cause__`` and ``__context__``, the
formatted traceback) for the secrets a request carries: a signed query, Basic
credentials in the URL (and their base64 form), a bearer token, an API key
in a custom header. The server (``hostile_server.py``) misbehaves on purpose.
"""

import asyncio
import base64
import datetime
import tarfile
import traceback

import pytest

from dataloader import DataLoader
from dataloader.sources import (
    HttpDataset,
    ObjectStoreDataset,
    Retry,
    ShardLimits,
    TarDataset,
)

pytest.importorskip("aiohttp")
from hostile_server import HostileServer

SIGNATURE = "SIGsecret0e3b0c44298fc1c149afbf4c8996fb924"
PASSWORD = "PWsecret1"
TOKEN = "TOKsecret2"
API_KEY = "KEYsecret3"
BASIC = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
SECRETS = (SIGNATURE, PASSWORD, BASIC, TOKEN, API_KEY)
QUERY = f"X-Amz-Credential=AKIA%2F1&X-Amz-Signature={SIGNATURE}"
ONCE = Retry(max_retries=1, initial_backoff=0.01, max_backoff=0.01)


@pytest.fixture(scope="module")
def server():
    server = HostileServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def other():
    """Another origin (another port)."""
    server = HostileServer().start()
    yield server
    server.stop()


def exposed(error):
    """Every text reachable from ``error``: what a log, a traceback or a debugger shows."""
    texts, seen, stack = [], set(), [error]
    while stack:
        obj = stack.pop()
        if obj is None or id(obj) in seen or isinstance(obj, (int, float, bool)):
            continue
        seen.add(id(obj))
        texts += [repr(obj), str(obj)]
        if isinstance(obj, BaseException):
            texts.append("".join(traceback.format_exception(obj)))
            stack += [obj.__cause__, obj.__context__, *obj.args]
            stack += [*getattr(obj, "__notes__", []), *vars(obj).values()]
        elif isinstance(obj, dict):
            stack += [*obj.keys(), *obj.values()]
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack += list(obj)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            stack += list(vars(obj).values())
    return "\n".join(texts)


def assert_clean(error):
    text = exposed(error)
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} in {type(error).__name__}: {text[:2000]}"
    assert error.__cause__ is None and error.__context__ is None, repr(error.__context__)


def credentials(base, path, how):
    """``(url, headers)``: a signed URL with Basic credentials, or a bearer token."""
    host = base.removeprefix("http://")
    sep = "&" if "?" in path else "?"
    if how == "basic":
        return f"http://alice:{PASSWORD}@{host}{path}{sep}{QUERY}", {"X-Api-Key": API_KEY}
    return f"{base}{path}{sep}{QUERY}", {"Authorization": f"Bearer {TOKEN}", "X-Api-Key": API_KEY}


def fetch(dataset, index=0):
    async def run():
        try:
            return await dataset[index]
        finally:
            await dataset.aclose()

    return asyncio.run(run())


# (path, expected type, message fragment): each route's failure.
FAILURES = [
    ("/loop", OSError, "more than 10 redirects"),
    ("/to-ftp", OSError, "redirect to ftp:// refused"),
    ("/to?url=file:///etc/passwd", OSError, "redirect to file:// refused"),
    ("/status/403", OSError, "HTTP 403 Forbidden after 1 attempt"),
    ("/status/500", OSError, "HTTP 500 Internal Server Error after 2 attempts"),
    ("/status/404", FileNotFoundError, "HTTP 404"),
    ("/echo-headers/401", OSError, "HTTP 401 Unauthorized"),
    ("/reset", OSError, "connection failed"),
    ("/slow", TimeoutError, "timed out after 0.5 s after 2 attempts"),
    ("/endless", ValueError, "body exceeds max_bytes=100000"),
]
HOW = ["basic", "bearer"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize(("path", "kind", "message"), FAILURES, ids=[f[0] for f in FAILURES])
def test_http_errors_hold_no_secret(server, path, kind, message, how):
    url, headers = credentials(server.url, path, how)
    dataset = HttpDataset([url], headers=headers, timeout=0.5, max_bytes=100_000, retry=ONCE)
    with pytest.raises(kind) as raised:
        fetch(dataset)
    assert message in str(raised.value)
    assert f"GET {server.url}{path.split('?')[0]}" in str(raised.value)
    assert_clean(raised.value)


@pytest.mark.parametrize("how", HOW)
def test_a_response_that_is_not_http_is_an_os_error_without_secrets(server, how):
    url, headers = credentials(server.raw, "/x", how)
    with pytest.raises(OSError, match=r"invalid response|connection failed") as raised:
        fetch(HttpDataset([url], headers=headers, retry=ONCE))
    assert_clean(raised.value)


def test_connection_refused_and_a_bad_url_hold_no_secret():
    url, headers = credentials("http://127.0.0.1:9", "/x", "bearer")
    with pytest.raises(OSError, match="connection failed") as raised:
        fetch(HttpDataset([url], headers=headers, retry=Retry(max_retries=0)))
    assert_clean(raised.value)
    bad = f"http://alice:{PASSWORD}@[::1/x?{QUERY}"
    with pytest.raises(ValueError) as raised:
        fetch(HttpDataset([bad], headers={"X-Api-Key": API_KEY}, retry=Retry(max_retries=0)))
    assert_clean(raised.value)


def test_credentials_in_the_url_and_an_authorization_header_are_refused_cleanly(server):
    url, _ = credentials(server.url, "/echo", "basic")
    dataset = HttpDataset([url], headers={"Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(ValueError, match="cannot both be given") as raised:
        fetch(dataset)
    assert_clean(raised.value)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("path", ["/loop", "/status/403", "/reset", "/to-ftp"])
def test_errors_raised_by_a_loader_hold_no_secret(server, path, how):
    url, headers = credentials(server.url, path, how)
    dataset = HttpDataset([url], headers=headers, retry=ONCE)
    with DataLoader(dataset, batch_size=1, num_workers=1, collate_fn=list) as loader:
        with pytest.raises(OSError) as raised:
            next(iter(loader))
    assert_clean(raised.value)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize(("path", "kind"), [
    ("/loop", OSError), ("/to-ftp", OSError), ("/status/403", OSError),
    ("/echo-headers/500", OSError), ("/reset", OSError), ("/slow", TimeoutError),
])
def test_tar_shard_errors_hold_no_secret(server, path, kind, how):
    url, headers = credentials(server.url, path, how)
    dataset = TarDataset(url, headers=headers, timeout=0.5, retry=ONCE)
    with pytest.raises(kind) as raised:
        next(iter(dataset))
    assert_clean(raised.value)
    with DataLoader(TarDataset(url, headers=headers, timeout=0.5, retry=ONCE),
                    batch_size=None, num_workers=1) as loader:
        with pytest.raises(kind) as raised:
            next(iter(loader))
    assert_clean(raised.value)


def member_header(name, size):
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def test_a_dripping_shard_times_out_without_secrets(server):
    # A member of 1 MiB whose bytes come 64 at a time, every 50 ms (1280 bytes/s):
    # far slower than min_rate over any window of 0.5 s waited. Only waiting counts: a
    # reader held up elsewhere for 800 times as long as it waits would pass.
    server.bodies["big-member"] = member_header("0.bin", 1 << 20)
    url, headers = credentials(server.url, "/drip?every=0.05&head=big-member", "bearer")
    limits = ShardLimits(min_rate=1 << 20, rate_window=0.5)
    dataset = TarDataset(url, headers=headers, limits=limits, retry=Retry(max_retries=0))
    with pytest.raises(TimeoutError, match=r"too slow, .*ShardLimits.min_rate=1048576") as raised:
        next(iter(dataset))
    assert_clean(raised.value)


@pytest.mark.parametrize("how", HOW)
def test_a_shard_cut_mid_member_fails_without_secrets(server, how):
    server.bodies["half"] = member_header("0.bin", 4096) + b"x" * 1000
    url, headers = credentials(server.url, "/cut?head=half", how)
    with pytest.raises(OSError) as raised:
        next(iter(TarDataset(url, headers=headers, retry=ONCE)))
    assert_clean(raised.value)


def test_repr_stats_and_state_hold_no_secret(server):
    url, headers = credentials(server.url, "/body/ok.tar", "basic")
    server.bodies["ok.tar"] = b"\0" * 1024
    http = HttpDataset([url], headers=headers)
    tar = TarDataset(url, headers=headers)
    iterator = iter(tar)
    assert list(iterator) == []
    for text in (repr(http), repr(tar), str(tar.stats()), str(iterator.state_dict())):
        for secret in SECRETS:
            assert secret not in text


# -- redirects to another origin ----------------------------------------------------------

def test_a_redirect_to_another_origin_sends_no_user_header(server, other):
    url, headers = credentials(server.url, f"/to?url={other.url}/echo", "bearer")
    assert fetch(HttpDataset([url], headers=headers)) == b"echo"
    received = {name.lower() for name in other.seen["/echo"]}
    assert "x-api-key" not in received and "authorization" not in received
    assert server.seen["/to"]["X-Api-Key"] == API_KEY  # the first origin had them


def test_url_credentials_do_not_follow_a_redirect_to_another_origin(server, other):
    url, headers = credentials(server.url, f"/to?url={other.url}/echo", "basic")
    assert fetch(HttpDataset([url], headers=headers)) == b"echo"
    assert server.seen["/to"]["Authorization"] == f"Basic {BASIC}"
    received = {name.lower() for name in other.seen["/echo"]}
    assert "x-api-key" not in received and "authorization" not in received


def test_headers_follow_a_redirect_within_the_origin(server):
    url, headers = credentials(server.url, "/to?url=/echo", "basic")
    assert fetch(HttpDataset([url], headers=headers)) == b"echo"
    assert server.seen["/echo"]["X-Api-Key"] == API_KEY
    assert server.seen["/echo"]["Authorization"] == f"Basic {BASIC}"


def test_headers_do_not_come_back_when_the_chain_returns_to_the_origin(server, other):
    back = f"{other.url}/to?url={server.url}/echo"
    url, headers = credentials(server.url, f"/to?url={back}", "bearer")
    server.seen.pop("/echo", None)
    assert fetch(HttpDataset([url], headers=headers)) == b"echo"
    received = {name.lower() for name in server.seen["/echo"]}
    assert "x-api-key" not in received and "authorization" not in received


def test_a_shard_redirected_to_another_origin_sends_no_user_header(server, other):
    other.bodies["s.tar"] = b"\0" * 1024
    url, headers = credentials(server.url, f"/to?url={other.url}/body/s.tar", "bearer")
    assert list(TarDataset(url, headers=headers)) == []
    received = {name.lower() for name in other.seen["/body/s.tar"]}
    assert "x-api-key" not in received and "authorization" not in received


# -- object stores ------------------------------------------------------------------------

KEY_ID = "AKIDsecret4"
SECRET_KEY = "SKsecret5"
SESSION_TOKEN = "STsecret6"
STORE_SECRETS = (KEY_ID, SECRET_KEY, SESSION_TOKEN)


def store_options(server):
    backoff = {"init_backoff": datetime.timedelta(milliseconds=10),
               "max_backoff": datetime.timedelta(milliseconds=10), "base": 2}
    return {
        "endpoint": server.url, "region": "us-east-1", "access_key_id": KEY_ID,
        "secret_access_key": SECRET_KEY, "token": SESSION_TOKEN,
        "client_options": {"allow_http": True, "timeout": "2s"},
        "retry_config": {"max_retries": 0, "backoff": backoff,
                         "retry_timeout": datetime.timedelta(seconds=5)},
    }


def assert_store_clean(error):
    text = exposed(error)
    for secret in STORE_SECRETS:
        assert secret not in text, f"{secret!r} in {type(error).__name__}: {text[:2000]}"
    assert error.__cause__ is None and error.__context__ is None, repr(error.__context__)


STORE_FAILURES = [
    ("loop", OSError), ("to-ftp", OSError), ("status/403", PermissionError),
    ("echo-headers/403", PermissionError), ("echo-headers/500", OSError),
    ("status/404", FileNotFoundError), ("reset", OSError), ("slow", OSError),
]


@pytest.mark.parametrize(("key", "kind"), STORE_FAILURES, ids=[f[0] for f in STORE_FAILURES])
def test_object_store_errors_hold_no_secret(server, key, kind):
    obstore = pytest.importorskip("obstore")
    store = obstore.store.S3Store("bucket", **store_options(server))
    with pytest.raises(kind) as raised:
        fetch(ObjectStoreDataset(store, [key]))
    assert_store_clean(raised.value)
    with pytest.raises(kind) as raised:
        next(iter(TarDataset(f"s3://bucket/{key}", store_options=store_options(server))))
    assert_store_clean(raised.value)


def test_object_store_listing_errors_hold_no_secret(server):
    pytest.importorskip("obstore")
    with pytest.raises(OSError) as raised:
        ObjectStoreDataset.from_url("s3://bucket/echo-headers/403", **store_options(server))
    assert_store_clean(raised.value)


def test_store_credentials_are_scrubbed_from_whatever_obstore_says():
    obstore = pytest.importorskip("obstore")
    from dataloader.sources._object_store import credentials_of, mapped_error

    store = obstore.store.S3Store("bucket", endpoint="http://127.0.0.1:9", region="us-east-1",
                                  access_key_id=KEY_ID, secret_access_key=SECRET_KEY,
                                  token=SESSION_TOKEN)
    said = obstore.exceptions.GenericError(
        f"failed: key={KEY_ID} secret={SECRET_KEY} token={SESSION_TOKEN} url=http://h/k")
    error = mapped_error(said, "S3Store(bucket)", obstore, credentials_of(store))
    assert type(error) is OSError and "url=http://h/k" in str(error)
    assert_store_clean(error)
