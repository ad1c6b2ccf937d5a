"""Mistakes `mypy --strict` must report against the `weft` stubs (test_typing.py)."""

import weft

cache = weft.CacheManager().cache("default")
number: int = cache.get("k")
cache.put(1, "v")
text: str | None = cache.get("k")
