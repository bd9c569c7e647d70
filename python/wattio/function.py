"""Writing intelligence functions in Python.

Subclass :class:`Function` and override the events you care about. A function never performs
I/O or reads a clock: each event brings the current time (``now``, integer nanoseconds) and an
``out`` object collecting actions:

- ``out.submit(io)`` — send an I/O to the layer below (from the bottom layer: to device
  ``io.dev``); ``io.replace(dev=..., offset=...)`` makes a modified copy;
- ``out.submit(Io(n, "write", offset, length, dev=d, own=True))`` — an I/O the function
  originates itself (a cache fill, a write-back, a prefetch): its completion comes back to
  this function's ``on_completion`` (``done.io.id`` is the new I/O's ``id``) and is never
  replied upward; number them yourself (``n`` below 2**62, unique among yours in flight);
- ``out.reply(done)`` — complete an I/O received from above (``done.for_io(io)`` re-targets a
  completion at another I/O, e.g. the parent of a split request); ``out.reply_now(io)``
  completes without device work;
- ``Io(n, op, offset, length, dev=d, own=True, scratch=k)`` — own I/O that moves bytes through
  the function's scratch buffer ``k``; ``out.copy(dst, src, length=...)`` between scratch
  buffers and I/O buffers, ``out.release(k)``; metadata of its own: ``out.fill(k, data)``,
  ``out.take(k, length, tag)`` (the bytes come to ``on_bytes``), ``regions()``,
  ``out.fail(message)``;
- ``out.set_power(device_id, state_id)`` — queue a power command at a device;
- ``out.set_timer(timer_id, at_ns)`` / ``out.cancel_timer(timer_id)``.

The same object runs in the simulator (``wattio run``) and live (``wattio serve``). A unit
test can also drive it by hand: ``Io(n, op, offset, length, dev=d)`` is a host request,
``Completion(io, status="ok", finished=ns)`` its completion, and ``out`` any object with the
methods above that records what it is given.
"""

from __future__ import annotations

from wattio._core import Completion, Io

__all__ = ["Completion", "Function", "Io"]


class Function:
    """Base class of Python intelligence functions (one layer of a stack)."""

    #: Name shown in summaries and reports.
    name = "python"

    def attach(self, devices) -> None:
        """Called once with the run's devices (``wattio._core.Device``: ``id``, ``name``,
        ``capacity``, ``states``, ``state_id(name)``, ``deepest_sleep``, ``break_even_ns()``,
        ``transition_ns(a, b)``)."""

    def on_start(self, now: int, out) -> None:
        """The run starts."""

    def on_stop(self, now: int, out) -> None:
        """A clean unload (the live server shuts down, or a simulated run with
        ``[run] unload = true`` ends): no request follows; submit what must reach the
        devices before the stack goes away (the executor waits for it, then unloads the
        layers below). Called once the layers above have no I/O out; this layer's own
        I/O sent before may still be out (its completions still come), and no timer
        fires from now on."""

    def on_request(self, now: int, io, out) -> None:
        """A request from above. The default passes it down unchanged."""
        out.submit(io)

    def on_completion(self, now: int, done, out) -> None:
        """An I/O this layer submitted finished. The default replies upward."""
        out.reply(done)

    def on_timer(self, now: int, timer: int, out) -> None:
        """A timer this layer set expired."""

    def on_power(self, now: int, device: int, state: int) -> None:
        """A device entered (stable) power state ``state``."""

    def on_transition(self, now: int, device: int, to: int) -> None:
        """A device began a power transition towards state ``to``; it serves no I/O until
        ``on_power`` reports ``to``."""

    def on_bytes(self, now: int, tag: int, data: bytes, out) -> None:
        """The bytes ``out.take(k, length, tag)`` asked for: a read of the function's own
        metadata (into scratch buffer ``k``) that came back."""

    def regions(self) -> list[tuple[int, int, int]]:
        """Device ranges this function reserves for its metadata, as ``(device id, offset,
        length)``, 4 KiB-aligned; asked once after ``attach``. The stack refuses ranges that
        overlap or leave their device, the data checker refuses host data written there, and
        the simulator keeps the bytes written there (and loses, at a simulated crash, what
        a real one could). Keep them out of the space you pass down."""
        return []

    def unload_left(self) -> str | None:
        """After the unload (``on_stop`` and the I/O it sent are done): what this layer
        could not finish, in a sentence (a write-back whose device failed), or None.
        ``summary.json`` reports it as ``unload.left``."""
        return None

    def counters(self) -> dict[str, float]:
        """Function-specific numbers for ``summary.json``."""
        return {}
