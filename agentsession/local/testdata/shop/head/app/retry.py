"""Retrying calls."""
import functools
import time

MAX_ATTEMPTS = 3


def retry(fn):
    """Calls fn up to MAX_ATTEMPTS times."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for attempt in range(MAX_ATTEMPTS):
            try:
                return fn(*args, **kwargs)
            except IOError:
                time.sleep(attempt)
        raise RuntimeError("gave up")
    return wrapper
