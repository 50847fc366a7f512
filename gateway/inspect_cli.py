"""`gateway inspect [--follow] [ID]`: the inspector's API (gateway/handlers/inspector.py) in a
terminal, from a running gateway. A summary line per request; with an ID the request with its
attempts, repairs, continuity and the client and provider transcripts aligned, each row marked:

    -  dropped     the client sent it, the provider did not get it
    +  inserted    the provider got it, the client did not send it
    ~  projected   the same block, its tool id in the provider's format
    *  restored    the same block, with continuity the client's copy lacked
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any, TextIO

MARKS = {"": " ", "dropped": "-", "inserted": "+", "projected": "~", "restored": "*"}
TEXT = 60  # characters of a block's text on its line


class InspectError(Exception):
    pass


class Client:
    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/") + "/inspector/api"
        self.headers = {"Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def _open(self, path: str, body: Any = None, timeout: float | None = 30) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {**self.headers, **({"Content-Type": "application/json"} if data else {})}
        request = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - a URL the user gave
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read())["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = exc.reason
            raise InspectError(f"{exc.code}: {message}") from None
        except OSError as exc:
            raise InspectError(f"cannot reach the gateway at {self.url}: {exc}") from None

    def get(self, path: str) -> Any:
        with self._open(path) as response:
            return json.loads(response.read())

    def post(self, path: str, body: Any) -> Any:
        with self._open(path, body) as response:
            return json.loads(response.read())

    def events(self) -> Iterator[dict[str, Any]]:
        with self._open("/events", timeout=None) as response:
            for line in response:
                if line.startswith(b"data: "):
                    yield json.loads(line[6:])


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}ms"


def summary_line(s: dict[str, Any]) -> str:
    repairs = ",".join(f"{k}={n}" for k, n in sorted(s["repairs"].items()))
    route = f"{s['model']}->{s['provider'] or '-'}"
    return (
        f"{s['time'][11:23]}  {s['id']}  {s['ingress']:<18} {route:<24} {s['status']:>3} {s['outcome']:<14}"
        f" {_ms(s['duration_ms']):>7}  {repairs}"
    ).rstrip()


def _block(row: dict[str, Any] | None) -> str:
    if row is None:
        return ""
    what = " ".join(x for x in (row["kind"], row.get("name", ""), row.get("id", "")) if x)
    text = row["text"].replace("\n", " ")
    if len(text) > TEXT:
        text = text[: TEXT - 1] + "…"
    return f"#{row['message']} {row['role']} {what}: {text}"


def transcript_lines(transcript: dict[str, Any]) -> list[str]:
    lines = [f"transcript: client | {transcript['provider_name'] or 'no provider'}"]
    client, provider = transcript["client"], transcript["provider"]
    for left, right in transcript["pairs"]:
        a = client[left] if left is not None else None
        b = provider[right] if right is not None else None
        row = a or b
        assert row is not None
        mark = row["mark"]
        line = f"  {MARKS[mark]} {_block(a) or '(none)'}"
        if mark in ("projected", "inserted", "restored") and b is not None:
            line += f"   =>   {_block(b)}"
        if mark:
            line += f"   [{mark}{': ' + row['note'] if row.get('note') else ''}]"
        lines.append(line)
    return lines


def detail_lines(d: dict[str, Any]) -> list[str]:
    tokens = d["tokens"]
    lines = [
        f"request {d['id']}  {d['time']}  {d['ingress']}  session {d['session']}",
        f"  {d['model']} -> {d['provider'] or '-'} {d['upstream_model']}  status {d['status']} {d['outcome']}"
        f"  duration {_ms(d['duration_ms'])}  first token {_ms(d['ttft_ms'])}",
    ]
    if tokens:
        lines.append(
            f"  tokens in {tokens['input']} (cached {tokens['cache_read']}) out {tokens['output']}"
            f" (reasoning {tokens['reasoning']})"
        )
    lines.append("attempts:")
    for i, a in enumerate(d["attempts"], 1):
        error = f"  {a['error']['message']}" if a["error"] else ""
        lines.append(
            f"  {i}. {a['provider']} {a['model']}: {a['outcome']} ({a['status']})"
            f" at +{_ms(a['started_ms'])} took {_ms(a['elapsed_ms'])}{error}"
        )
    lines.append("repairs:" + ("" if d["repairs"] else " none"))
    for r in d["repairs"]:
        target = f" for {r['target']}" if r.get("target") else ""
        lines.append(f"  {r['kind']}{target}{': ' + r['detail'] if r['detail'] else ''}")
    c = d["continuity"]
    for x in c["echoed"]:
        lines.append(f"continuity echoed by the client: message {x['message']} {x['block']} ({x['kind']})")
    for x in c["restored"]:
        lines.append(
            f"continuity restored from the record: message {x['message']} {x['block']} ({x['kind']})"
        )
    lines.extend(transcript_lines(d["transcript"]))
    response = d["response"]
    if response and response.get("error"):
        lines.append(f"error: {response['error']}")
    return lines


def preview_lines(p: dict[str, Any]) -> list[str]:
    t = p["target"]
    lines = [f"{t['provider']} ({t['kind']}, {t['model']}) would receive, for request {p['id']}:"]
    lines.append("repairs: " + (", ".join(r["kind"] for r in p["repairs"]) or "none"))
    lines.extend(transcript_lines(p["transcript"]))
    if p["error"]:
        lines.append(f"nothing would be sent: {p['error']}")
    else:
        lines.append(f"POST {p['url']}")
        lines.append(json.dumps(p["upstream_request"], indent=2, ensure_ascii=False))
    return lines


def run(
    url: str,
    token: str,
    request_id: str | None,
    follow: bool,
    limit: int,
    preview: str | None,
    out: TextIO = sys.stdout,
) -> int:
    client = Client(url, token)
    try:
        if request_id is None:
            for s in reversed(client.get(f"/requests?limit={limit}")):
                print(summary_line(s), file=out, flush=True)
            if follow:
                for s in client.events():
                    print(summary_line(s), file=out, flush=True)
        elif preview:
            print(
                "\n".join(preview_lines(client.post(f"/requests/{request_id}/preview", {"model": preview}))),
                file=out,
            )
        else:
            print("\n".join(detail_lines(client.get(f"/requests/{request_id}"))), file=out)
    except InspectError as exc:
        print(f"gateway inspect: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0
