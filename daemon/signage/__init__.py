"""Table signage: a web page fed by the table's public MQTT topics (issue 7). See docs/signage.md."""
