"""Worker processes: the second kind of worker, for Python work under the GIL."""
