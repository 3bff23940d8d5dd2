"""Transports: serial paths, pyserial URLs (socket://, rfc2217://) and USB."""
