"""Device drivers: protocol codecs (bytes to typed events) and transports (serial, TCP, USB)."""
