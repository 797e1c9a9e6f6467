"""A job restarted from its saved state, again and again: the batches it sees."""

import json


def run_in_pieces(make, pieces, epochs, record=lambda batch: batch.tolist()):
    """The batches of ``epochs`` epochs (a list per epoch, each as ``record(batch)``), taken
    as a restarted job does.

    Loader ``i`` takes ``pieces[i]`` batches, across epoch ends, dropping each
    as a training step does, saves its state through JSON and is closed; a
    fresh loader resumes from that state, and the last one runs to the end of
    the last epoch. Batches are filed under the epoch ``loader.epoch`` names.
    """
    done = [[] for _ in range(epochs)]
    state = None
    for piece in [*pieces, None]:
        loader = make()
        if state is not None:
            loader.load_state_dict(state)
        it = iter(loader)
        taken = 0
        while piece is None or taken < piece:
            try:
                batch = next(it)
            except StopIteration:
                if loader.epoch == epochs - 1:
                    break
                it = iter(loader)
                continue
            done[loader.epoch].append(record(batch))
            del batch
            taken += 1
        state = json.loads(json.dumps(loader.state_dict()))
        del it
        loader.close()
    return done
