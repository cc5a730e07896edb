"""Caseless matching: the one folding function every search uses, for needle and haystack."""

from __future__ import annotations

import unicodedata


def fold(text: str) -> str:
    """NFC of the case folding of the NFD form (canonical caseless matching, research §6).

    ASCII text has no decompositions and casefolds to its lowercase, so it skips the two
    normalisations: most documentation is ASCII, and this runs over every body of a bundle.
    Text that is its own fold is given back as it is, not as an equal copy: the folds search
    keeps of every concept's ID, tags and description are mostly the strings themselves.
    """
    if text.isascii():
        folded = text.lower()
        return text if folded == text else folded
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", text).casefold())
