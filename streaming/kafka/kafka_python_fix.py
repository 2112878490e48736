"""A fix for kafka-python 3.0's transport: bytes the broker sends just before it closes are read, not dropped.

kafka-python 3.0 (``kafka.net.transport``) reads a socket until the read would block. If
its last read finds the connection closed, it aborts the connection *without passing on the
bytes it read before the close* (``KafkaTCPTransport._read_from_sock``, used by the TLS
transport too). Apache Kafka answers a refused SASL login and closes the connection right
after the answer (both held back by ``connection.failed.authentication.delay.ms``), so the
two often arrive together. kafka-python then sees only "socket disconnected" and in the end
says "Unable to bootstrap" instead of the broker's reason: 9 of 20 refused logins against
the test broker on a loaded machine. Then :mod:`streaming.kafka.refusals` cannot tell a
refused login from a broker that cannot be reached.

:func:`apply` swaps in a copy of that method that passes the bytes on first and aborts
at the next read, which finds the close again. It does so only for the versions that have the defect (3.0.0 to 3.0.12, the newest
when this was written), and leaves later versions alone.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger(__name__)

#: The kafka-python versions whose transport drops the bytes read before a close.
AFFECTED = ((3, 0, 0), (3, 0, 12))


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(".")[:3])
    except ValueError:
        return ()


async def _read_from_sock(self: Any) -> Any:
    """``KafkaTCPTransport._read_from_sock`` of kafka-python 3.0.12, passing on the bytes
    read before a close (or a read error) before it aborts the connection."""
    from kafka import errors

    while self._read and not self._closed:
        await self._net.wait_read(self._sock)
        recvd_data, err = self._sock_recv()
        if err and not recvd_data:
            return self.abort(error=err)
        # bytes read before a close (err): passed on now, and the close found again by the
        # next read, so that the requests they answer complete (a refused login raises its
        # SaslAuthenticationFailedError) before the connection is aborted
        log.debug("%s: received %d bytes", self, len(recvd_data))
        self.last_read = time.monotonic()
        if self._protocol and self._protocol._sensors:
            self._protocol._sensors.bytes_received.record(len(recvd_data))
        try:
            self._protocol.data_received(recvd_data)
        except errors.KafkaProtocolError as e:
            return self.abort(error=e)
    return None


def apply() -> bool:
    """Swap in the fixed read loop if the installed kafka-python is one of :data:`AFFECTED`.

    Idempotent. Returns whether the fixed loop is in place.
    """
    try:
        from kafka.net import transport
        from kafka.version import __version__
    except ImportError:  # kafka-python 2.x: another network layer, without this defect
        return False
    low, high = AFFECTED
    cls = getattr(transport, "KafkaTCPTransport", None)
    if cls is None or not low <= _version(__version__) <= high or not hasattr(cls, "_read_from_sock"):
        return False
    cls._read_from_sock = _read_from_sock
    return True
