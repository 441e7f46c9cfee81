"""The ranks' agreement before a DualPipe builds its pipeline for a num_chunks (deepseek.py): each rank posts its
num_chunks and declared message shapes to the default store and reads everyone's, so that ranks that differ stop
naming the values, rather than with a lost connection once the schedules' messages disagree (or, for shapes, a
receive of the wrong size, which aborts the process under Gloo).

The first wait looks at the store every 50 ms, so that a Ctrl-C (KeyboardInterrupt, which Python runs only between
two calls) ends it at once, and a rank that is interrupted leaves a word for its peers, which raise naming it
instead of waiting for it until their timeout."""
import datetime
import time
from typing import List, Sequence

# How often a wait looks at the store again: Python runs a Ctrl-C between two looks. (A blocking store.wait() of
# that length would do too, but the store logs a warning for each one that times out.)
_POLL_S = 0.05


def _wait(store, keys: Sequence[str], abort_key: str, timeout: float) -> None:
    """Waits until every key is set; raises RuntimeError with the peer's word if abort_key is set first, and
    TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if store.check([abort_key]):  # first: the interrupted rank had set its own key before it left
            raise RuntimeError(store.get(abort_key).decode())
        if store.check(list(keys)):
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"waited {timeout} s")
        time.sleep(min(_POLL_S, left))


def agree(store, prefix: str, rank: int, num_ranks: int, num_chunks: int, declared: str, timeout: float) -> None:
    """Posts this pipeline rank's num_chunks and declared shapes under `prefix` (one per pipeline build) and checks
    that every rank's are the same; ValueError naming them where they differ."""
    keys = [f"{prefix}/{r}" for r in range(num_ranks)]
    abort_key = f"{prefix}/interrupted"
    store.set(keys[rank], f"{num_chunks};{declared}")
    try:
        _wait(store, keys, abort_key, timeout)
    except KeyboardInterrupt:
        store.set(abort_key, f"rank {rank} was interrupted (KeyboardInterrupt) before its first step of "
                             f"num_chunks={num_chunks}")
        raise
    except RuntimeError as word:
        raise RuntimeError(f"rank {rank}: {word}") from None
    except TimeoutError as error:
        raise RuntimeError(f"rank {rank}: not every pipeline rank started a step of a new num_chunks within "
                           f"timeout={timeout} s (this rank's is {num_chunks}; a rank running another num_chunks, "
                           f"or stopped, does not): {error}") from None
    values, shapes = zip(*(store.get(key).decode().split(";", 1) for key in keys))
    counts: List[int] = [int(value) for value in values]
    # Every rank has read the values before any leaves: the store's host is a rank, and a rank that raises below and
    # exits would take the store with it while a peer still reads. A failed wait here is a peer that left after
    # reading: the values are whole.
    read = [f"{key}/read" for key in keys]
    store.set(read[rank], "1")
    try:
        store.wait(read, datetime.timedelta(seconds=timeout))
    except Exception:  # noqa: BLE001 - only a keep-alive; the values above decide
        pass
    if len(set(counts)) > 1:
        raise ValueError(f"num_chunks differs between the pipeline's ranks: {counts} (pipeline rank i's at index i); "
                         f"every rank's step() takes the same num_chunks")
    if len(set(shapes)) > 1:
        raise ValueError(f"set_p2p_tensor_shapes differs between the pipeline's ranks: {list(shapes)} (pipeline rank "
                         f"i's at index i); every rank declares the same shapes and dtype, or none")
