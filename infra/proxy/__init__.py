"""A metering HTTP proxy in front of any S3-compatible store.

Clients (S3A's AWS SDK, boto3) use ``MeteringProxy(upstream).endpoint`` as their
S3 endpoint with path-style addressing; the proxy relays each request to the
store and records one ``infra.s3ops.Event`` per request: what S3 operation it was
(``op``), which part of a Structured Streaming checkpoint or sink it touched
(``area``), its status, timing and payload bytes.

Guarantees:

* Requests are forwarded byte for byte as they arrived: request line, every header line
  (name, case, order, spacing, value) and the body with its framing (``Content-Length``, or
  ``Transfer-Encoding: chunked`` with its chunk extensions and trailers), HTTP/1.0 ones as
  HTTP/1.0. Responses, interim ones included, are relayed the same way, with one exception
  below. That is more than a signature needs (SigV4 and SigV2 sign the method, target, some
  headers' trimmed values and the payload, so they stay valid): nothing is re-serialized, so no
  header moves, no value is trimmed, no chunked body is re-chunked and no HTTP/1.0 message goes
  on as HTTP/1.1. (An injected fault breaks this on purpose, for the requests it matches: see
  ``infra.faults``.)
* Every request whose head arrives is counted, even if it then fails: the proxy's
  own 502 (store unreachable) is recorded with status 502, and a request cut
  short by a dropped connection with status 0. (Pipelined requests still waiting
  their turn when the connection closes were never read, so never counted.)

The HTTP parser is ``httptools`` (bindings to llhttp, the C parser of Node.js), chosen for its
cost per request: it parses a head in C and calls back only per header (measured: see
docs/findings/proxy-overhead.md). A fresh parser reads each message head
(request line or status, headers; it rejects what is not HTTP/1.x, a ``Content-Length`` beside
``Transfer-Encoding``, a repeated ``Content-Length``, a request whose last coding is not
chunked) and decides keep-alive (``Connection``, the HTTP version); it goes on to find where a
chunked body ends, chunk sizes, extensions and trailers included, and hands over its data for
counting. The bytes the proxy relays are always the ones it received, never the parser's output.

What the relay still does by hand, because httptools does not say it: where in the bytes fed a
message ended (so: a head ends at its first blank line; a ``Content-Length`` body after that
many bytes; a chunked body, which can only end right after a blank line, is fed to llhttp up to
each blank line in turn until llhttp says it is complete), and that a response answers a HEAD
(so it has no body, RFC 9112 6.3, whatever its head says). A head longer than 64 KiB ends the
connection. The proxy's own answers (a fault's, a 502) are a status line, a few headers and a
body, written out directly.

What the proxy does itself, because it is about proxying, not HTTP:

* ``Expect: 100-continue`` (the AWS Java SDK v1 sends it on every PUT, boto3 on
  PUTs with a body): the proxy answers ``100 Continue`` to the client itself as
  soon as the head arrives (unless body bytes already came with it), forwards the head
  unchanged (``Expect`` included, as it may be signed) and streams the body straight on;
  the store's own ``100 Continue`` is then dropped, as the client already had one. So a
  PUT never waits for the SDK's 100-continue timeout, whether or not the store answers 100.
  Cost: a store that rejects a request early (a 403 or a 404 before reading the body)
  still gets the body. Ceph RGW then neither reads it nor closes, so it would
  take that body for the start of the next request (405, then 400): the proxy
  does not reuse an upstream connection whose store answered an ``Expect``
  request with a final status and no ``100``. If the store closes instead, the
  proxy drains the client's body, relays the response if it can still read it,
  else a 502.
* Connections: one thread (from a pool) and one persistent upstream connection
  per client connection, checked for a close by the store before reuse (one
  non-blocking peek); a bodiless request that meets a stale connection is retried once on
  a fresh one. The client connection closes after a response when the request or the
  response says so (``Connection: close``, HTTP/1.0), or the response ends at the store's
  close. Pipelined requests are served one after the other. TCP_NODELAY on both sockets. A
  request goes to the store in one send once the client has sent all of it (or in 64 KiB
  pieces), a response to the client when the proxy is about to wait for more of it; the
  event is recorded before a response's last bytes go out, so a client that has its
  response finds its event already there.
* Counting: the S3 vocabulary is ``infra.s3ops``, classified from the parsed target and
  the one header it reads (``x-amz-copy-source``); ``bytes_in`` of an aws-chunked upload is
  its ``x-amz-decoded-content-length``, else the body's bytes without chunk framing.
* Faults: one hook per request, ``FaultRules.decide`` (``infra.faults``), asked
  once the head has arrived and before anything is forwarded, and the response-side hook
  an action may carry (``Forward.on_response``), called with the store's whole response
  before any of it is relayed. Each fault applied is kept as an ``Injection``. With no
  rules in force (profile ``none``) a request takes exactly the path it takes without
  the fault machinery, and its headers are never gathered into a mapping (a rule that
  reads ``RequestInfo.headers`` builds it on first use).

Limits: path-style addressing only (the first path segment is the bucket),
plain-HTTP upstream only, and the store must accept whatever ``Host`` the client
used (Ceph RGW, MinIO and moto do; AWS S3 does not).

Overhead: a proxied 1 KiB PUT should cost at most 10% more than a direct one (the target of
``benchmarks/floor.py``). On an idle machine it does; with other work on a small machine the share
rises with the load, most likely (not measured apart) because every proxied request wakes the proxy
at least twice and a wake-up may wait for a CPU (measured: see docs/findings/proxy-overhead.md).

The code, each module importing only the ones after it: ``server`` (``MeteringProxy``: lifecycle,
the events and injections kept, the rules in force), ``session`` (one client connection: the relay
and the fault actions carried out; it reaches the proxy only through the ``ProxyLink`` the server
hands it), and ``framing`` (where HTTP/1.x messages begin and end, with llhttp).
"""

from __future__ import annotations

from .server import MeteringProxy, upstream_address

__all__ = ["MeteringProxy", "upstream_address"]
