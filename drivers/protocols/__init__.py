"""Protocol codecs: bytes to typed device events and back, registered by name."""
