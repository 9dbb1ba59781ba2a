"""Helpers shared by the numerical-core tests."""


def printed(value: float, text: str) -> None:
    """Assert ``value`` prints as the lecture prints it (same number of decimals)."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    assert f"{value:.{decimals}f}" == text, f"{value!r} does not print as {text}"
