"""Thin entry points: parse arguments, build the session, wire the library together."""
