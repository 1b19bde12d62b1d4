"""One token bucket per scope in Redis, leased ahead by every proxy worker.

Why: with a bucket per worker, each worker can only send its share of a
scope's rate, and the global controller re-splits the shares once per
interval from what each worker used. Traffic moves between workers far
faster than that (every GET on a new connection may land on another worker),
so the shares lag the demand and the scope gets well under its cap (62 of
125 MB/s with two workers per proxy). Here every worker draws from one
bucket per scope and direction, in Redis, so the cap holds summed over all
workers and proxies whichever of them carries the traffic.

The bucket (``<prefix>qos:bucket:<direction>:<scope>``, a hash) holds
``tokens`` (bytes, negative when in debt) and the ``stamp`` of its last
refill (Redis time), refilled at the scope's rate up to ``capacity``. A lease
(``LEASE_LUA``, one round trip) takes tokens, going into debt: the worker
gets ``amount`` bytes and the delay after which the last of them is covered;
the bytes become usable linearly up to then, as the bucket refills. Since
every lease takes its place in one queue (the debt), the total can never
exceed the rate, however many workers lease.

Round trips cost tens of milliseconds on a loaded machine, so a stream must
never wait for one:

- A lease is the worker's fair part of ``horizon`` seconds of the scope's
  rate: ``rate * horizon * streams / all streams`` (the hash also keeps each
  lessee's active stream count, field ``lessee:<worker>`` =
  ``"<streams> <expiry>"``), or of what the bucket holds if that is more (no
  one is queued). ``horizon`` is twice the worker's measured round trip
  (bounded): enough that one lease in flight keeps its streams fed, small
  enough that a new stream's first lease is not queued behind long leases of
  others. Leases in proportion to streams make the split fair per stream,
  not per worker. A lease never exceeds what the worker's streams have left
  to move (their Content-Length), so a worker does not hold bytes it will
  not send when the next GET lands elsewhere.
- A worker asks for its next lease, in a green thread of its own, while it
  still holds about one (``_prefetch``); its streams keep consuming.
- A stream that lands on a worker holding nothing starts at once, on credit,
  at the worker's part of the rate as of its last lease, until the lease
  comes back (``_advance_rate``); what it moves stays asked for and is
  charged to that lease or the next one. So a Redis that stalls (an fsync,
  a busy machine) does not stop the streams: the workers go on at their
  parts, and the bucket is charged when it answers.
- When a worker's last stream of the scope ends and no other starts within
  ``GRACE``, it gives back what it holds, or pays what it moved on credit (a
  lease with a given-back amount), and leaves the lessees, so idle workers
  neither sit on the cap nor count as streams. A worker that stops without
  doing so drops out of the count after ``LESSEE_TTL``; the bucket key
  expires when unused.

So a new stream is shaped from its first byte at its fair share, instead of
running unshaped or at a floor until the controller's next assignment.

When Redis cannot be reached (or answers with an error), the worker falls
back for ``RETRY`` seconds to a bucket of its own at the rate the global
controller assigned to it, or the policy's cap: shaping never refuses data.
"""

from __future__ import annotations

import collections
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import eventlet
import eventlet.event
import redis

from iostack.policy.redis_keys import KeySpace

LOG = logging.getLogger(__name__)
LESSEE_TTL = 2.0  # s a lessee's stream count lasts without a new lease
KEY_TTL_MS = 60_000  # an unused bucket (and its lessees) vanishes after this
# s without trying Redis again after a failed lease. A failover takes about 4.5 s
# (Sentinel's 3 s down-after and an election), and the parts a worker paces at
# meanwhile serve its streams worse than the bucket: try again soon. A refused
# connection costs nothing; a hung store costs a lease's timeouts in a green thread.
RETRY = 1.0
HORIZON = (0.02, 0.25)  # bounds of a lease, in seconds of the scope's rate
GRACE = 0.005  # s an idle worker waits for a new stream before giving back what it holds
MAX_WAIT = 1.0  # s a waiting stream sleeps at most before looking again
# A wait shorter than this is not slept: the stream goes on and its bytes stay
# counted, so the next chunk waits that much longer (no drift). Swift's poll hub
# truncates a timeout to whole milliseconds, so a 0.5 ms sleep (a 64 KiB chunk at
# 125 MB/s) polls with 0 until it is due: one core spinning per shaped stream.
MIN_SLEEP = 0.002

LEASE_LUA = """
-- KEYS[1]: the bucket. ARGV: lessee, its streams (0: leaving), rate, capacity,
-- horizon (s), minimum and maximum amount, bytes given back, lessee TTL (s), key TTL (ms).
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local lessee, streams = 'lessee:' .. ARGV[1], tonumber(ARGV[2])
local rate, capacity = tonumber(ARGV[3]), tonumber(ARGV[4])
local horizon, minimum, maximum = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local back = tonumber(ARGV[8])
if streams > 0 then
  redis.call('HSET', KEYS[1], lessee, streams .. ' ' .. (now + tonumber(ARGV[9])))
else
  redis.call('HDEL', KEYS[1], lessee)
end
local all, tokens, stamp = 0, capacity, now
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local name, value = fields[i], fields[i + 1]
  if name == 'tokens' then tokens = tonumber(value)
  elseif name == 'stamp' then stamp = tonumber(value)
  else
    local n, expiry = string.match(value, '^(%S+) (%S+)$')
    if n == nil or tonumber(expiry) < now then redis.call('HDEL', KEYS[1], name)
    else all = all + tonumber(n) end
  end
end
tokens = math.min(capacity, tokens + math.max(0, now - stamp) * rate) + back
local amount = 0
if streams > 0 then
  -- its fair part of the horizon, or of what the bucket holds if more (no one is queued)
  local part = streams / math.max(all, streams)
  amount = math.min(maximum, math.max(minimum, rate * horizon * part, tokens * part))
  tokens = tokens - amount
end
tokens = math.min(capacity, tokens)
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', tostring(now))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[10]))
local covered = 0
if tokens < 0 then covered = -tokens / rate end
return {tostring(amount), tostring(covered), tostring(math.max(all, streams))}
"""


class LeaseStore(Protocol):
    def lease(self, scope: str, direction: str, lessee: str, streams: int, rate: float,
              capacity: float, horizon: float, minimum: float, maximum: float,
              give_back: float) -> tuple[float, float, int]:
        """(bytes granted, seconds until the last of them is covered, streams of all lessees)."""


class RedisLeases:
    """The buckets in Redis (``LEASE_LUA``, EVALSHA with redis-py's reload on NOSCRIPT)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.keys = KeySpace(prefix)
        self.script = client.register_script(LEASE_LUA)

    def lease(self, scope: str, direction: str, lessee: str, streams: int, rate: float,
              capacity: float, horizon: float, minimum: float, maximum: float,
              give_back: float) -> tuple[float, float, int]:
        amount, covered, streams = self.script(keys=[self.keys.qos_bucket(direction, scope)], args=[
            lessee, streams, repr(rate), repr(capacity), repr(horizon), repr(minimum),
            repr(min(maximum, 1e18)), repr(give_back), repr(LESSEE_TTL), KEY_TTL_MS])
        return float(amount), float(covered), int(float(streams))

    def lessees(self, scope: str, direction: str) -> dict[str, tuple[int, float]]:
        """Each lessee of the bucket: (its streams, when that count expires, in Redis
        time). A count expires ``LESSEE_TTL`` after the lease that set it, so one expiring
        later than ``t + LESSEE_TTL`` was leased after ``t``."""
        found = {}
        for name, value in self.client.hgetall(self.keys.qos_bucket(direction, scope)).items():
            name, value = _text(name), _text(value)
            if name.startswith("lessee:"):
                streams, expiry = value.split()
                found[name.removeprefix("lessee:")] = (int(streams), float(expiry))
        return found


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class TokenBucket:
    """``rate`` units per second, holding at most ``burst`` seconds' worth.

    ``reserve(n)`` takes ``n`` units at once, going into debt if need be, and
    says how long the caller must wait before using them: concurrent users of
    one bucket queue behind each other, in order. ``ticket(n)`` takes them the
    same way and ``wait(ticket)`` says how long is left at the rate of the
    moment: a reservation queued at a low rate is covered sooner once the rate
    rises (a waiter that sleeps in slices and asks again follows it).
    """

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.burst = burst
        self.rate = rate
        self.tokens = self.capacity
        self.stamp = clock()
        self.filled = 0.0  # units added by refills, ever: what tickets are counted in

    @property
    def capacity(self) -> float:
        return max(self.rate * self.burst, 1.0)

    def _refill(self) -> None:
        now = self.clock()
        added = (now - self.stamp) * self.rate
        self.filled += added
        self.tokens = min(self.capacity, self.tokens + added)
        self.stamp = now

    def set_rate(self, rate: float) -> None:
        self._refill()
        self.rate = rate
        self.tokens = min(self.tokens, self.capacity)

    def reserve(self, amount: float) -> float:
        return self.wait(self.ticket(amount))

    def ticket(self, amount: float) -> float:
        """Take ``amount``; the reservation is covered once ``filled`` reaches the ticket.
        (Refills beyond the capacity only happen with no debt: every ticket is covered.)"""
        self._refill()
        self.tokens -= amount
        return self.filled + max(0.0, -self.tokens)

    def wait(self, ticket: float) -> float:
        """Seconds until ``ticket`` is covered at the present rate; 0 when it is."""
        self._refill()
        return max(0.0, ticket - self.filled) / self.rate

    def refund(self, amount: float) -> None:
        self.tokens += amount


@dataclass
class Grant:
    """Leased bytes, covered linearly at ``rate`` until ``end`` (local monotonic time)."""

    amount: float
    end: float
    rate: float

    def covered(self, now: float) -> float:
        return min(self.amount, max(0.0, self.amount - (self.end - now) * self.rate))

    def when(self, covered: float) -> float:
        """The time at which ``covered`` of its bytes are."""
        return self.end - (self.amount - covered) / self.rate


class Stream:
    """One request body through a ``SharedBucket``; its length bounds what the worker leases."""

    def __init__(self, bucket: SharedBucket, length: int | None) -> None:
        self.bucket = bucket
        self.remaining = length
        self.open = True

    def take(self, amount: int) -> None:
        if self.remaining is not None:
            used = min(amount, self.remaining)
            self.remaining -= used
            self.bucket.remaining -= used
        self.bucket.take(amount)

    def close(self) -> None:
        if self.open:
            self.open = False
            self.bucket._leave(self.remaining)  # noqa: SLF001 - its own bucket


class SharedBucket:
    """A scope's bucket as one worker sees it: leased from Redis, its own share if it cannot.

    ``stream(length)`` opens a stream on it; the stream's ``take(n)`` returns
    once ``n`` more units are covered, sleeping (green) meanwhile, streams
    served in the order they asked; its ``close()`` ends it. Open streams and
    what they have left size the worker's leases.
    """

    def __init__(self, store: LeaseStore | None, scope: str, direction: str, lessee: str,
                 rate: float, share: float, burst: float, logger: Any = LOG,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.logger = logger
        self.scope = scope
        self.direction = direction
        self.lessee = lessee
        self.rate = rate  # the scope's, over every worker
        self.burst = burst
        self.clock = clock
        self.own = TokenBucket(share, burst, clock)  # when Redis cannot be used
        self.streams = 0
        self.remaining = 0  # units the streams of known length have still to move
        self.unbounded = 0  # streams of unknown length
        self.asked = 0.0  # units streams asked for, ever
        self.credited = 0.0  # units of finished grants, ever
        self.grants: collections.deque[Grant] = collections.deque()
        self.advance_since: float | None = None  # credit while a lease is late (_advance_rate)
        self.everyone = 0  # streams of all lessees at the last lease (0: none yet)
        self.leasing = False
        self.registered = False  # counted among the lessees in Redis
        self.last_amount = 0.0
        self.rtt = HORIZON[0] / 2  # measured per lease, smoothed
        self.down_until = 0.0 if store is not None else float("inf")
        self._arrived = eventlet.event.Event()

    # -- settings ----------------------------------------------------------------

    def set_rates(self, rate: float, share: float) -> None:
        """The scope's rate over all workers, and this worker's share of it (fallback)."""
        self.rate = rate
        if share != self.own.rate:
            self.own.set_rate(share)

    @property
    def horizon(self) -> float:
        return min(HORIZON[1], max(HORIZON[0], 2 * self.rtt))

    @property
    def shared(self) -> bool:
        return self.clock() >= self.down_until

    # -- streams -----------------------------------------------------------------

    def stream(self, length: int | None) -> Stream:
        """A stream of ``length`` units (None: unknown) starts using the bucket."""
        self.streams += 1
        if length is None:
            self.unbounded += 1
        else:
            self.remaining += length
        return Stream(self, length)

    def _leave(self, remaining: int | None) -> None:
        self.streams -= 1
        if remaining is None:
            self.unbounded -= 1
        else:
            self.remaining -= remaining
        if self.streams == 0 and self.shared:
            eventlet.spawn_n(self._give_back_when_idle)

    def wanted(self) -> float:
        """Units the streams may still ask for beyond what is held (inf: a length unknown)."""
        return (math.inf if self.unbounded else self.remaining) - self.held()

    def take(self, amount: float) -> None:
        if self.shared:
            self.asked += amount
            ticket = self.asked
            self._prefetch()
            while self.shared:
                now = self.clock()
                if self._covered(now) >= ticket:
                    return
                at = self._time_covered(ticket - self.credited)
                if at is not None:
                    if at - now < MIN_SLEEP:
                        return
                    eventlet.sleep(min(MAX_WAIT, at - now))
                elif self.leasing and self.advance_since is None:
                    self.advance_since = now
                else:  # nothing leased reaches it yet: wait for the next lease
                    self._wait_for_lease()
        # Redis failed (now, or while this stream waited): the worker's own share. The
        # wait is slept in slices: a new share (the controller's next assignment) applies
        # to the streams already queued, which a wait computed at a floor of a few kB/s
        # would otherwise hold for seconds.
        ticket = self.own.ticket(amount)
        while (delay := self.own.wait(ticket)) >= MIN_SLEEP:
            eventlet.sleep(min(MAX_WAIT, delay))

    def _wait_for_lease(self) -> None:
        arrived = self._arrived
        self._prefetch()
        if not arrived.ready():
            arrived.wait(MAX_WAIT)
        if arrived.ready() and self._arrived is arrived:
            self._arrived = eventlet.event.Event()

    def _advance_rate(self) -> float:
        """Credit for the round trip of the lease under way, at the streams' fair share.

        A stream that lands on a worker holding nothing (GETs on new connections
        move between workers) would otherwise stall for a round trip. The bytes
        it moves meanwhile are not free: they stay asked for, so the lease that
        comes back (which ends this credit) or the next one pays for them, and
        the total over a few round trips still holds the rate. The credit grows
        with the streams that join meanwhile, and lasts until the lease comes
        back (or fails: then the worker's own bucket paces at the same part).
        """
        return self._part() * self.rate if self.everyone else self.own.rate

    # -- accounting --------------------------------------------------------------

    def _covered(self, now: float) -> float:
        """Units covered so far: finished grants folded into ``credited``."""
        while self.grants and self.grants[0].end <= now:
            self.credited += self.grants.popleft().amount
        advanced = 0.0
        if self.advance_since is not None:
            advanced = (now - self.advance_since) * self._advance_rate()
        return self.credited + sum(g.covered(now) for g in self.grants) + advanced

    def _time_covered(self, need: float) -> float | None:
        """When ``need`` units past ``credited`` are covered, or None if the grants fall short."""
        for grant in self.grants:
            if need <= grant.amount:
                return grant.when(need)
            need -= grant.amount
        if self.advance_since is not None:
            return self.advance_since + need / self._advance_rate()
        return None

    def held(self) -> float:
        """Units leased and not yet asked for by a stream."""
        return self.credited + sum(g.amount for g in self.grants) - self.asked

    def _prefetch(self) -> None:
        """Ask for the next lease while about one is still held: streams never wait a trip."""
        held = self.held()
        if not self.leasing and held < max(self._fair_lease(), 1.0) and self.wanted() > 0:
            self.leasing = True
            eventlet.spawn_n(self._call, max(self.streams, 1), max(-held, 1.0), self.wanted(), 0.0)

    def _fair_lease(self) -> float:
        """What a lease brings this worker, about: its streams' part of a horizon."""
        return self._part() * self.rate * self.horizon if self.everyone else self.last_amount

    def _part(self) -> float:
        """This worker's part of the scope: its streams over everyone's at the last lease.

        Streams that joined here since are taken to have come from other workers
        (GETs moving between workers), not to add to everyone's.
        """
        mine = max(self.streams, 1)
        return mine / max(self.everyone, mine)

    def _give_back_when_idle(self) -> None:
        """Return what is held (and leave the lessees) once no stream came back in ``GRACE``."""
        eventlet.sleep(GRACE)
        held = self.held()
        if self.streams == 0 and not self.leasing and self.shared and self.registered:
            self.grants.clear()
            self.credited = self.asked
            self.leasing = True
            self._call(0, 0.0, 0.0, held)

    def _call(self, streams: int, minimum: float, maximum: float, give_back: float) -> None:
        """One round trip (``leasing`` set by the caller): lease, or give back; a grant
        takes its place at the end of the queue. Never called without a store."""
        rate = self.rate
        sent = self.clock()
        try:
            amount, covered, streams_all = self.store.lease(
                self.scope, self.direction, self.lessee, streams, rate,
                rate * max(self.burst, self.horizon), self.horizon, minimum, maximum,
                give_back)
        except (redis.RedisError, OSError) as exc:
            self.logger.warning("IOStack QoS: shared bucket of %s %s unusable for %gs, pacing "
                                "at this worker's share: %s", self.scope, self.direction, RETRY,
                                exc)
            self.down_until = self.clock() + RETRY
            self.advance_since = None
            self.grants.clear()
            self.credited = self.asked
            return
        else:
            back = self.clock()
            self.rtt = 0.7 * self.rtt + 0.3 * (back - sent)
            self.registered = streams > 0
            self.advance_since = None
            self.everyone = streams_all
            if amount > 0:
                self.last_amount = amount
                self.grants.append(Grant(amount, (sent + back) / 2 + covered, rate))
        finally:
            self.leasing = False
            if not self._arrived.ready():
                self._arrived.send()
        if streams and self.streams == 0:  # its streams ended during the trip
            eventlet.spawn_n(self._give_back_when_idle)
