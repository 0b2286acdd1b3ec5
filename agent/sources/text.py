"""The one decoding step every text input passes through, agent and backend alike.

Saved `nvidia-smi` output, `topo -m` matrices and scheduler snapshots reach us through
editors, Windows tools, terminals and ticket systems, which add a UTF-8 byte-order mark
(a `topo -m` with one grew an extra column), CRLF line ends, colour escapes around a
header, or save UTF-16. Doing this once, here, keeps the parsers about their formats; the
backend's snapshot decoder imports it too (the dependency points from the backend to the
agent, never back).
"""

from __future__ import annotations

import codecs
import re

BOM = "\ufeff"
# CSI sequences (colours, underline): `ESC[4m` ... `ESC[0m` around a topo -m header.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class TextDecodeError(ValueError):
    """Bytes that are not text this project reads (not UTF-8, or binary)."""


def decode_text(data: str | bytes | bytearray) -> str:
    """UTF-8 text without a leading byte-order mark, ANSI escapes or CRLF line ends.

    Raises TextDecodeError for UTF-16/32 (a PowerShell redirect), other non-UTF-8 bytes,
    and NUL characters (binary data, or a file padded with zeros when a crash cut it);
    the message says where, never what.
    """
    if isinstance(data, bytes | bytearray):
        raw = bytes(data)
        if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            raise TextDecodeError(
                "the input is UTF-16 text (a Windows redirect?), not UTF-8: convert it first"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TextDecodeError(
                f"the input is not UTF-8 text (bad byte at offset {exc.start})"
            ) from None
    else:
        text = data
    text = text.removeprefix(BOM)
    nul = text.find("\x00")
    if nul != -1:
        raise TextDecodeError(
            f"the input holds a NUL character at line {text.count(chr(10), 0, nul) + 1} "
            f"(offset {nul}): binary data, or a file "
            "padded with zeros after being cut short"
        )
    if "\x1b" in text:
        text = ANSI_ESCAPE.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    return text
