"""Protocol codecs: bytes to typed device events and back, registered by name.

``get_codec("tsref")`` returns the codec class registered under that name in the entry point group
``tablesense.protocols``; see :mod:`drivers.protocols.base` for the interface and docs/adding-a-codec.md.
"""

from tablesense.drivers.protocols.base import (
    ENTRY_POINT_GROUP,
    Codec,
    CodecStats,
    SequenceGap,
    UnknownProtocol,
    get_codec,
    protocol_names,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "Codec",
    "CodecStats",
    "SequenceGap",
    "UnknownProtocol",
    "get_codec",
    "protocol_names",
]
