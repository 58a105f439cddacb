"""The timeline as one self-contained HTML page: inline SVG, CSS and script. Pure.

No network fetch of any kind: nothing is loaded from anywhere, and the page's Content-Security-Policy
(``default-src 'none'``) forbids the browser to try, so it opens behind a firewall, from a file, or
from any static file server the sweeper writes it for.

Every text from the board (titles, marker notes, halt reasons) is attacker-controlled: it reaches
the page only through :func:`esc`, as element text or a quoted attribute, and the script moves it
only with ``textContent`` — never into markup. Control and bidi characters are shown as ``\\u....``
so a title cannot reorder or hide the text around it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from datetime import datetime

from fleet.core.model import parse_iso
from fleet.timeline.layout import Scale, bar_span, buckets, pack, plot_width
from fleet.timeline.model import RUNNING, Flag, Lane, Run, Timeline
from fleet.timeline.trace_view import Band, Dark, Sweep

# Every named outcome, in legend order, with its colour (terminal kinds of fleet.core.markers + running).
COLOURS: dict[str, str] = {
    "success": "#2e9d4f",
    "pr-open": "#3b7dd8",
    "no-op": "#9aa0a6",
    "failed": "#d93025",
    "blocked": "#b3541e",
    "timed-out": "#8e44ad",
    "garbled": "#d63384",
    "stopped": "#5f6368",
    "cancelled": "#202124",
    "superseded": "#f2c94c",
    "reaped": "#ff6d00",
    "parked": "#8ecae6",
    "capacity": "#f4a300",
    "cross-repo": "#00897b",
    RUNNING: "#5bc0eb",
}
BAND_COLOURS = {
    "halt": "#d93025",
    "pause": "#f4a300",
    "drain": "#3b7dd8",
    "board-unreadable": "#8e44ad",
}
GUTTER = 190  # lane labels
ROW = 16  # px per row of bars
AXIS = 34  # time axis
AGG = 46  # the aggregate strip
SWEEP_LANE = 44
LANE_MIN = 36

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def esc(text: object) -> str:
    """Board text as safe HTML text or attribute value; invisible controls made visible."""
    shown = _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", str(text))
    return html.escape(shown, quote=True)


def _reset(text: str) -> str:
    try:
        t = parse_iso(text)
    except (ValueError, OverflowError):
        t = None
    return _stamp(t) if t is not None else text


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def _dur(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def run_tip(r: Run, now: datetime) -> str:
    end = _stamp(r.end) if r.end else "still open (no terminal marker yet)"
    lines = [
        f"#{r.issue} {r.title}",
        f"run {r.run_id} on {r.worker}" + (f" ({r.master})" if r.master else ""),
        f"{_stamp(r.start)} → {end}",
        f"duration {_dur(r.duration_s(now))}, outcome {r.outcome}",
    ]
    if r.flags:
        lines.append("flags: " + ", ".join(sorted(f.value for f in r.flags)))
    if r.parked_due:
        lines.append(f"retry parked until {_stamp(r.parked_due)}")
    lines.append(r.start_text)
    if r.terminal_text:
        lines.append(r.terminal_text)
    return "\n".join(lines)


def _run_svg(r: Run, scale: Scale, y: float, link: str | None) -> str:
    x0, x1 = bar_span(scale, r)
    colour = COLOURS.get(r.outcome, "#777")
    cls = ["run", f"o-{r.outcome}"] + [f"f-{f.value}" for f in sorted(r.flags)]
    attrs = (
        f'class="{esc(" ".join(cls))}" data-issue="{r.issue}" data-outcome="{esc(r.outcome)}" '
        f'data-run="{esc(r.run_id)}" data-tip="{esc(run_tip(r, scale.now))}"'
    )
    body = (
        f'<rect x="{x0:.1f}" y="{y:.1f}" width="{x1 - x0:.1f}" height="{ROW - 4}" rx="2" '
        f'fill="{colour}"/>'
    )
    if r.parked_due is not None and r.end is not None:
        px = scale.x(r.parked_due)
        body += (
            f'<line class="wait" x1="{x1:.1f}" x2="{max(px, x1):.1f}" y1="{y + (ROW - 4) / 2:.1f}" '
            f'y2="{y + (ROW - 4) / 2:.1f}"/>'
        )
    if {Flag.SUPERSEDED, Flag.REAPED} & r.flags:
        glyph = "⇢" if Flag.SUPERSEDED in r.flags else "♻"
        body += f'<text class="flag" x="{x1 + 2:.1f}" y="{y + ROW - 5:.1f}">{glyph}</text>'
    if Flag.CLOCK_SKEW in r.flags:
        body += f'<text class="flag" x="{x0 - 7:.1f}" y="{y + ROW - 5:.1f}">!</text>'
    body += f"<title>{esc(f'#{r.issue} {r.title} — {r.outcome}')}</title>"
    if link:
        return f'<a href="{esc(link)}" target="_blank" rel="noopener noreferrer" {attrs}>{body}</a>'
    return f'<g tabindex="0" role="img" aria-label="{esc(f"#{r.issue} {r.outcome}")}" {attrs}>{body}</g>'


LABEL_CHAR_PX = 5.6  # a 10 px label's average glyph width: a label is drawn only where it fits


def _dark_svg(d: Dark, scale: Scale, y: float, height: float, room: float = 1e9) -> str:
    x0, x1 = scale.x(d.start), scale.x(d.end)
    reset = "reset unknown (none stated)" if d.reset == "unknown" else f"reset {_reset(d.reset)}"
    label = f"dark: {d.source}, {reset}" + (" (ongoing)" if d.ongoing else "")
    tip = f"{d.worker} {label}\nfrom {_stamp(d.start)} to {_stamp(d.end)}\n{d.evidence}"
    return (
        f'<g class="dark" tabindex="0" data-worker="{esc(d.worker)}" data-source="{esc(d.source)}" '
        f'data-tip="{esc(tip)}"><rect x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0, 2):.1f}" '
        f'height="{height:.1f}" fill="url(#hatch)"/>'
        + (
            f'<text class="dlabel" x="{x0 + 3:.1f}" y="{y + height - 4:.1f}">{esc(label)}</text>'
            if len(label) * LABEL_CHAR_PX <= room
            else ""
        )
        + "</g>"
    )


def _lane_svg(lane: Lane, scale: Scale, top: float, link: dict[int, str]) -> tuple[str, float]:
    rows = pack(scale, lane.runs)
    # Room for the two label lines, and a row under the bars for a dark period's label.
    height = max(LANE_MIN, ((max(rows) + 1) if rows else 1) * ROW + 8 + (14 if lane.darks else 0))
    parts = [
        f'<g class="lane" data-worker="{esc(lane.worker)}" data-master="{esc(lane.master)}">',
        f'<rect class="lanebg" x="0" y="{top:.1f}" width="{scale.left + scale.width + 40:.1f}" '
        f'height="{height:.1f}"/>',
        f'<text class="lname" x="8" y="{top + 15:.1f}">{esc(lane.label)}</text>',
        f'<text class="lsub" x="8" y="{top + 28:.1f}">{len(lane.runs)} runs'
        + ("" if lane.in_inventory else " · not in inventory")
        + "</text>",
    ]
    # A dark period's label is drawn where it fits before the next one starts; otherwise its
    # tooltip carries it (a row of overlapping labels is a smear, not a label).
    starts = [scale.x(d.start) for d in lane.darks] + [scale.left + scale.width + 40]
    parts += [
        _dark_svg(d, scale, top, height, room=starts[i + 1] - starts[i] - 6)
        for i, d in enumerate(lane.darks)
    ]
    parts += [
        _run_svg(r, scale, top + 4 + row * ROW, link.get(r.issue))
        for r, row in zip(lane.runs, rows, strict=True)
    ]
    parts.append("</g>")
    return "".join(parts), height


def _sweep_svg(s: Sweep, scale: Scale, top: float) -> str:
    x = scale.x(s.at)
    up = min(SWEEP_LANE / 2 - 4, 4 + 3 * len(s.launched))
    down = min(SWEEP_LANE / 2 - 4, 3 * len(s.refused))
    mid = top + SWEEP_LANE / 2
    launched = ", ".join(f"#{n}→{w}" for n, w in s.launched) or "nothing"
    refused = "\n".join(f"  #{f.issue} (exit {f.code}) {f.reason}" for f in s.refused)
    tip = f"sweep at {_stamp(s.at)}: {s.outcome or 'outcome not recorded'}\n{s.summary}\n"
    tip += f"launched {launched}" + (f"\nrefused:\n{refused}" if refused else "")
    return (
        f'<g class="sweep" tabindex="0" data-outcome="{esc(s.outcome)}" '
        f'data-launched="{len(s.launched)}" data-refused="{len(s.refused)}" data-tip="{esc(tip)}">'
        f'<line class="tick" x1="{x:.1f}" x2="{x:.1f}" y1="{mid:.1f}" y2="{mid - up:.1f}"/>'
        + (
            f'<line class="refused" x1="{x:.1f}" x2="{x:.1f}" y1="{mid:.1f}" y2="{mid + down:.1f}"/>'
            if s.refused
            else ""
        )
        + "</g>"
    )


def _band_svg(b: Band, scale: Scale, top: float, bottom: float) -> str:
    x0, x1 = scale.x(b.start), scale.x(b.end)
    tip = f"{b.label}\nfrom {_stamp(b.start)} to " + (
        "now (ongoing)" if b.ongoing else _stamp(b.end)
    )
    colour = BAND_COLOURS.get(b.kind, "#777")
    return (
        f'<g class="band" tabindex="0" data-kind="{esc(b.kind)}" data-tip="{esc(tip)}">'
        f'<rect x="{x0:.1f}" y="{top:.1f}" width="{max(x1 - x0, 2):.1f}" height="{bottom - top:.1f}" '
        f'fill="{colour}" fill-opacity="0.13" stroke="{colour}" stroke-opacity="0.5"/>'
        f'<text class="blabel" x="{x0 + 3:.1f}" y="{top + 11:.1f}" fill="{colour}">'
        f"{esc(b.kind.upper())}</text></g>"
    )


def _axis(scale: Scale, top: float, bottom: float) -> str:
    span = (scale.now - scale.since).total_seconds() or 1.0
    ticks = 10
    parts = []
    for i in range(ticks + 1):
        t = scale.since + (scale.now - scale.since) * (i / ticks)
        x = scale.x(t)
        fmt = "%H:%M:%S" if span < 3600 else ("%H:%M" if span < 2 * 86400 else "%m-%d %H:%M")
        parts.append(
            f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{top:.1f}" y2="{bottom:.1f}"/>'
            f'<text class="tlabel" x="{x:.1f}" y="{top - 6:.1f}">{t.strftime(fmt)}</text>'
        )
    return "".join(parts)


def _aggregate(scale: Scale, runs: list[Run], top: float) -> str:
    counts = buckets(scale, runs)
    peak = max((sum(b.values()) for b in counts), default=0) or 1
    w = scale.width / len(counts)
    parts = [f'<text class="lname" x="8" y="{top + 15:.1f}">runs started</text>']
    parts.append(f'<text class="lsub" x="8" y="{top + 28:.1f}">peak {peak} per bucket</text>')
    for i, b in enumerate(counts):
        y = top + AGG - 4
        for outcome in COLOURS:
            n = b.get(outcome, 0)
            if not n:
                continue
            h = n / peak * (AGG - 8)
            y -= h
            parts.append(
                f'<rect class="agg" x="{scale.left + i * w:.1f}" y="{y:.1f}" width="{max(w - 1, 1):.1f}" '
                f'height="{h:.1f}" fill="{COLOURS[outcome]}"/>'
            )
    return "".join(parts)


def svg(tl: Timeline) -> tuple[str, int, int]:
    """The picture: (svg markup, width, height)."""
    busiest = max((len(lane.runs) for lane in tl.lanes), default=0)
    scale = Scale(tl.since, tl.now, GUTTER, plot_width(busiest))
    width = int(GUTTER + scale.width + 60)
    top: float = AXIS
    body = [_aggregate(scale, list(tl.runs), top)]
    top += AGG
    lanes_top = top
    body.append(
        f'<g class="lane sweeper" data-worker="sweeper"><text class="lname" x="8" y="{top + 15}">'
        f'sweeper (dispatcher)</text><text class="lsub" x="8" y="{top + 28}">{len(tl.sweeps)} sweeps'
        f"</text>" + "".join(_sweep_svg(s, scale, top) for s in tl.sweeps) + "</g>"
    )
    top += SWEEP_LANE
    for lane in tl.lanes:
        markup, h = _lane_svg(lane, scale, top, dict(tl.links))
        body.append(markup)
        top += h
    bands = "".join(_band_svg(b, scale, lanes_top, top) for b in tl.bands)
    height = int(top + 10)
    defs = (
        '<defs><pattern id="hatch" width="8" height="8" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="8" height="8" fill="#fff4d6"/>'
        '<line x1="0" y1="0" x2="0" y2="8" stroke="#f4a300" stroke-width="3" '
        'stroke-opacity="0.45"/></pattern></defs>'
    )
    markup = (
        f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="group" aria-label="fleet run timeline">{defs}'
        + _axis(scale, AXIS, height)
        + "".join(body)
        + bands
        + "</svg>"
    )
    return markup, width, height


def legend(tl: Timeline) -> str:
    counts = tl.counts()
    items = [
        f'<li class="key" data-outcome="{esc(o)}"><span class="sw" style="background:{c}"></span>'
        f"{esc(o)} <b>{counts.get(o, 0)}</b></li>"
        for o, c in COLOURS.items()
    ]
    items += [
        f'<li class="key"><span class="sw" style="background:{c};opacity:.35"></span>{esc(k)} band</li>'
        for k, c in BAND_COLOURS.items()
    ]
    items.append('<li class="key"><span class="sw hatch"></span>capacity-dark (source, reset)</li>')
    items.append(
        '<li class="key"><span class="sw dup"></span>⇢ superseded duplicate · ♻ reaped start</li>'
    )
    items.append('<li class="key"><span class="sw wait"></span>parked retry: wait until due</li>')
    return '<ul id="legend">' + "".join(items) + "</ul>"


CSS = """
body{font:13px/1.35 system-ui,sans-serif;margin:0;color:#202124;background:#fff}
header{padding:10px 14px;border-bottom:1px solid #ddd}
h1{font-size:17px;margin:0 0 4px}
#legend{list-style:none;margin:6px 0 0;padding:0;display:flex;flex-wrap:wrap;gap:4px 14px}
.key{display:flex;align-items:center;gap:5px}
.sw{display:inline-block;width:16px;height:10px;border-radius:2px}
.sw.hatch{background:repeating-linear-gradient(45deg,#fff4d6 0 4px,#f4a30073 4px 7px)}
.sw.dup{border:2px dashed #d00;width:12px;height:6px}
.sw.wait{border-top:2px dashed #3b7dd8;height:0}
#scroll{overflow:auto;max-height:calc(100vh - 110px)}
.lanebg{fill:#fafafa;stroke:#e3e3e3}
.lname{font-weight:600;font-size:12px}
.lsub,.tlabel,.dlabel,.blabel{font-size:10px;fill:#5f6368}
.tlabel{text-anchor:middle}
.grid{stroke:#eee}
.tick{stroke:#2e9d4f;stroke-width:2}
.refused{stroke:#d93025;stroke-width:2}
.wait{stroke:#3b7dd8;stroke-dasharray:3 2;stroke-width:1.5}
.run rect{stroke:#0003}
.band rect{pointer-events:none}
.f-superseded rect,.f-reaped rect{stroke:#d00;stroke-width:2;stroke-dasharray:4 2}
.f-duplicate rect{stroke:#d00;stroke-width:1.5}
.flag{font-size:12px;fill:#d00;font-weight:700}
.run:focus,.sweep:focus,.band:focus,.dark:focus{outline:none}
.run:focus rect,.run:hover rect{stroke:#000;stroke-width:2.5}
.sweep:focus line,.band:focus rect,.dark:focus rect{stroke:#000;stroke-width:3}
#tip{position:fixed;display:none;white-space:pre-wrap;max-width:560px;background:#202124;color:#fff;
padding:7px 9px;border-radius:4px;font:12px/1.35 ui-monospace,monospace;pointer-events:none;z-index:9}
#errors:empty{display:none}
#errors{color:#d93025}
"""

# Static: it moves board text only with textContent. It records its own errors in #errors and marks
# the page ready, so a headless browser can tell a page whose script ran from one that did not.
SCRIPT = """
(function(){
  var errs=document.getElementById('errors');
  window.addEventListener('error',function(e){errs.textContent+=String(e.message)+'\\n';});
  var tip=document.getElementById('tip');
  function show(el){
    var text=el.getAttribute('data-tip'); if(!text){return;}
    tip.textContent=text; tip.style.display='block';
    var r=el.getBoundingClientRect();
    var x=Math.min(r.left, window.innerWidth-tip.offsetWidth-8);
    var y=r.bottom+6; if(y+tip.offsetHeight>window.innerHeight){y=Math.max(4,r.top-tip.offsetHeight-6);}
    tip.style.left=Math.max(4,x)+'px'; tip.style.top=y+'px';
    tip.setAttribute('data-for', el.getAttribute('data-run')||el.getAttribute('class'));
  }
  function hide(){tip.style.display='none';}
  function target(e){return e.target.closest ? e.target.closest('[data-tip]') : null;}
  var svg=document.getElementById('timeline');
  svg.addEventListener('mouseover',function(e){var t=target(e); if(t){show(t);}});
  svg.addEventListener('mouseout',hide);
  svg.addEventListener('focusin',function(e){var t=target(e); if(t){show(t);}});
  svg.addEventListener('focusout',hide);
  document.addEventListener('keydown',function(e){if(e.key==='Escape'){hide();}});
  document.body.setAttribute('data-ready','1');
})();
"""


def page(tl: Timeline, *, title: str = "fleet timeline", note: Iterable[str] = ()) -> str:
    """The whole self-contained page."""
    markup, _w, _h = svg(tl)
    counts = tl.counts()
    summary = f"{sum(counts.values())} runs, {len(tl.sweeps)} sweeps, {len(tl.bands)} holds"
    extra = "".join(f"<div>{esc(n)}</div>" for n in note)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{esc(title)}</h1><div>{esc(_stamp(tl.since))} → {esc(_stamp(tl.now))} · "
        f"{esc(summary)} · hover or Tab to a bar for its run</div>{extra}{legend(tl)}"
        '<pre id="errors"></pre></header>'
        f'<div id="scroll">{markup}</div><div id="tip" role="tooltip"></div>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )
