"""What the ranks of the test programs check their results with: a failed check raises, so that the rank exits
non-zero and start_ranks (ranks.py) reports it."""


def cosine_distance(x, y):
    """1 - cos(x, y) over all elements, in float64: 0 for equal tensors, a scale-free measure of rounding noise."""
    x, y = x.double(), y.double()
    return 1 - 2 * (x * y).sum().item() / (x * x + y * y).sum().item()


def check(condition, what):
    if not condition:
        raise AssertionError(what)
