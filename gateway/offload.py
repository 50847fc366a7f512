"""Large requests are worked on off the event loop.

Decoding, repairing and encoding a transcript is linear in its blocks: about 5-8 us each, so a
request within the default limits (200,000 one-character blocks, ~5 MB) held the event loop for
over a second, and every other client waited. A body of OFFLOAD_BYTES or more (decided once, from
its size, when it has been read: `Exchange.offload`) is parsed, decoded, repaired and encoded in a
worker thread (`asyncio.to_thread`); the interpreter hands the GIL back to the event loop every
switch interval (5 ms), so the loop keeps answering while the thread works. Smaller bodies stay
on the loop: a thread hop costs more than their whole decode.

A large body skips the transcript memo (gateway/ingress/memo.py): its cache belongs to the event
loop's thread, and the repair passes and encoders are pure, so they are safe to run elsewhere.
"""

from __future__ import annotations

# at the densest (one-character blocks, ~27 bytes each) this is ~10,000 blocks: well under 100 ms
# of loop time for a body just below it
OFFLOAD_BYTES = 256 * 1024
