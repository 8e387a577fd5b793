"""A hub endpoint where nothing listens, for the tests of a hub that cannot be reached."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class DeadHub:
    """An endpoint where nothing listens, and every connection a client tried to open to it."""

    url: str
    attempts: list[tuple[str, int]] = field(default_factory=list)

    @classmethod
    def open(cls, monkeypatch: pytest.MonkeyPatch) -> DeadHub:
        """A port just released on 127.0.0.1 (refused at once). Attempts are counted where every HTTP client
        opens its TCP connections, socket.create_connection, so that a test asserts how many requests were
        tried rather than how long they took."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dead = cls(f"http://127.0.0.1:{port}")
        real = socket.create_connection

        def counting(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
            if address[1] == port:
                dead.attempts.append(address)
            return real(address, *args, **kwargs)

        monkeypatch.setattr(socket, "create_connection", counting)
        return dead
