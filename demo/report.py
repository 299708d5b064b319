"""The demo's outputs: summary.json (numbers other tools read) and index.html (what a person looks at).

index.html is one self-contained file: inline SVG charts and CSS, no script, no external
asset, so it opens from a CI artifact or an email as well as from disk.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

W, H, PAD = 560, 240, 44
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea")


def _scale(lo: float, hi: float, a: float, b: float):  # noqa: ANN202
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step) + 1)]


def line_chart(
    title: str, series: dict[str, Sequence[tuple[float, float]]], *, x_label: str, y_label: str
) -> str:
    """An SVG line chart; each series is a list of (x, y) points."""
    points = [p for s in series.values() for p in s]
    if not points:
        return f"<p><em>{html.escape(title)}: no data</em></p>"
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_lo, x_hi, y_lo, y_hi = min(xs), max(xs), min(ys), max(ys)
    if y_lo == y_hi:
        y_lo, y_hi = y_lo - 0.5, y_hi + 0.5
    sx, sy = _scale(x_lo, x_hi, PAD, W - 12), _scale(y_lo, y_hi, H - PAD, 14)
    out = [f'<svg viewBox="0 0 {W} {H}" role="img" aria-label="{html.escape(title)}">']
    for t in _ticks(y_lo, y_hi):
        out.append(f'<line x1="{PAD}" x2="{W - 12}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" class="grid"/>')
        out.append(f'<text x="{PAD - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for t in _ticks(x_lo, x_hi, 6):
        out.append(f'<text x="{sx(t):.1f}" y="{H - PAD + 16}" text-anchor="middle">{t:g}</text>')
    out.append(f'<text x="{(W + PAD) / 2}" y="{H - 6}" text-anchor="middle">{html.escape(x_label)}</text>')
    out.append(
        f'<text x="12" y="{H / 2}" transform="rotate(-90 12 {H / 2})" text-anchor="middle">{html.escape(y_label)}</text>'
    )
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        if len(pts) < 30:
            out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}"/>' for x, y in pts]
        out.append(
            f'<text x="{W - 16}" y="{20 + 14 * i}" text-anchor="end" fill="{colour}">{html.escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def latency_chart(results: Sequence[dict[str, Any]], slo_ms: float | None) -> str:
    """Grouped bars of p50/p95/p99 per load-test concurrency, with the SLO as a line."""
    if not results:
        return "<p><em>no load test results</em></p>"
    keys = ("p50_ms", "p95_ms", "p99_ms")
    # Scale to the measurements: an SLO far above them would flatten every bar; it is then named, not drawn.
    top = max(float(r.get(k) or 0) for r in results for k in keys) * 1.25 or 1.0
    if slo_ms and slo_ms <= top * 1.5:
        top = max(top, slo_ms * 1.1)
    sy = _scale(0, top, H - PAD, 14)
    group = (W - PAD - 12) / len(results)
    bar = group / (len(keys) + 1)
    out = [f'<svg viewBox="0 0 {W} {H}" role="img" aria-label="latency percentiles">']
    for t in _ticks(0, top):
        out.append(f'<line x1="{PAD}" x2="{W - 12}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" class="grid"/>')
        out.append(f'<text x="{PAD - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for g, row in enumerate(results):
        x0 = PAD + g * group + bar / 2
        for i, k in enumerate(keys):
            v = float(row.get(k) or 0)
            out.append(
                f'<rect x="{x0 + i * bar:.1f}" y="{sy(v):.1f}" width="{bar * 0.9:.1f}" height="{sy(0) - sy(v):.1f}" '
                f'fill="{COLOURS[i]}"><title>{k} {v:.1f} ms</title></rect>'
            )
        label = f"concurrency {row.get('concurrency')} · {float(row.get('rps') or 0):.0f} req/s"
        out.append(
            f'<text x="{x0 + 1.5 * bar:.1f}" y="{H - PAD + 16}" text-anchor="middle">{html.escape(label)}</text>'
        )
    if slo_ms and slo_ms > top:
        out.append(
            f'<text x="{W - 14}" y="28" text-anchor="end" class="slo-label">p99 SLO {slo_ms:g} ms (above the chart)</text>'
        )
    elif slo_ms:
        out.append(
            f'<line x1="{PAD}" x2="{W - 12}" y1="{sy(slo_ms):.1f}" y2="{sy(slo_ms):.1f}" class="slo"/>'
        )
        out.append(
            f'<text x="{W - 14}" y="{sy(slo_ms) - 4:.1f}" text-anchor="end" class="slo-label">p99 SLO {slo_ms:g} ms</text>'
        )
    for i, k in enumerate(keys):
        out.append(f'<text x="{PAD + 8 + 60 * i}" y="14" fill="{COLOURS[i]}">{k.removesuffix("_ms")}</text>')
    out.append(f'<text x="12" y="{H / 2}" transform="rotate(-90 12 {H / 2})" text-anchor="middle">ms</text>')
    out.append("</svg>")
    return "\n".join(out)


def _fmt(v: Any) -> str:
    if isinstance(v, str) and len(v) > 24 and " " not in v:  # a hash or digest
        return v[:12] + "…"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items())
    return "—" if v is None else str(v)


def monitoring_section(mon: dict[str, Any]) -> str:
    """Drift on the clean and shifted windows, and whether the drift alert reached the receiver."""
    if not mon:
        return ""
    rows = "".join(
        f"<tr><td>{name}</td><td>{w.get('records')}</td>"
        f"<td class='{'bad' if w.get('drift_detected') else 'ok'}'>{'drift' if w.get('drift_detected') else 'no drift'}</td>"
        f"<td>{_fmt(w.get('score'))} (threshold {_fmt(w.get('threshold'))})</td>"
        f"<td>{html.escape(', '.join(w.get('drifted_features') or []) or '—')}</td>"
        f"<td><a href='{html.escape(str(w.get('report')))}'>Evidently report</a></td></tr>"
        for name, w in ((n, mon.get(n) or {}) for n in ("clean", "shifted"))
    )
    delivered = mon.get("alert_delivered")
    alert = mon.get("alert") or {}
    return (
        "<h2>Monitoring: inference records, drift, alert</h2>"
        f"<p>{mon.get('record_objects')} record file(s) in <code>{html.escape(str(mon.get('records_url')))}</code>"
        " (descriptors, prediction, latency; no text).</p>"
        "<table><tr><th>window</th><th>records</th><th>verdict</th><th>score</th><th>drifted features</th>"
        f"<th>report</th></tr>{rows}</table>"
        f"<p>Drift alert through Prometheus + Alertmanager to the on-call webhook: "
        f"<b class='{'ok' if delivered else 'bad'}'>{'delivered' if delivered else 'not delivered'}</b>"
        f"{' — ' + html.escape(str(alert.get('summary'))) if alert else ''}</p>"
    )


def render_html(summary: dict[str, Any], history: Sequence[dict[str, Any]], links: dict[str, str]) -> str:
    train, export, serve = summary.get("train") or {}, summary.get("export") or {}, summary.get("serve") or {}
    promotion = summary.get("promotion") or {}
    loss = [
        (float(h["step"]), float(h["loss"])) for h in history if h.get("loss") is not None and "step" in h
    ]
    val = [(float(h["step"]), float(h["val_accuracy"])) for h in history if h.get("val_accuracy") is not None]
    decision = promotion.get("decision") or "not reached"
    badge = {"promote": "ok", "reject": "bad"}.get(decision, "na")
    stage_rows = "".join(
        f"<tr><td>{s['number']}</td><td>{html.escape(s['title'])}</td><td class='{s['status']}'>{s['status']}</td>"
        f"<td>{s['seconds']:.0f} s</td><td><a href='{html.escape(s['log'])}'>log</a></td></tr>"
        for s in summary.get("stages", [])
    )
    gate_rows = "".join(
        f"<tr><td>{html.escape(g['name'])}</td><td class='{g['status']}'>{g['status'].replace('_', ' ')}</td>"
        f"<td>{html.escape(_fmt(g['measured']))}</td><td>{html.escape(_fmt(g['threshold']))}</td>"
        f"<td>{html.escape(g['detail'])}</td></tr>"
        for g in promotion.get("gates", [])
    )
    headline = [
        ("test accuracy", train.get("test_accuracy")),
        ("TF-IDF baseline", train.get("baseline_tfidf_accuracy")),
        ("ONNX parity max |Δ|", export.get("parity_max_abs_diff")),
        ("req/s", (serve.get("loadtest") or {}).get("rps")),
        ("p99 ms", (serve.get("loadtest") or {}).get("p99_ms")),
        ("errors", (serve.get("loadtest") or {}).get("errors")),
    ]
    cards = "".join(
        f"<div class='card'><b>{html.escape(_fmt(v))}</b><span>{k}</span></div>" for k, v in headline
    )
    link_items = "".join(
        f"<li><a href='{html.escape(u)}'>{html.escape(t)}</a></li>" for t, u in links.items()
    )
    failed = summary.get("failed_stage")
    banner = (
        f"<p class='banner bad'>Stopped at stage <b>{html.escape(failed['name'])}</b>: {html.escape(failed['why'])}</p>"
        if failed
        else ""
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>eu-ml-platform demo</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1180px;padding:0 1rem;color:#111}}
h1{{margin-bottom:.2rem}} .sub{{color:#555;margin-top:0}}
.cards{{display:flex;gap:.8rem;flex-wrap:wrap}} .card{{border:1px solid #ddd;border-radius:8px;padding:.6rem 1rem;min-width:120px}}
.card b{{display:block;font-size:1.5rem}} .card span{{color:#555;font-size:.85rem}}
.grid2{{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:1rem}}
svg{{width:100%;height:auto;border:1px solid #eee;border-radius:8px;font-size:11px}}
svg .grid{{stroke:#eee}} svg .slo{{stroke:#dc2626;stroke-dasharray:5 4}} svg .slo-label{{fill:#dc2626}}
table{{border-collapse:collapse;width:100%;margin:.5rem 0}} td,th{{border-bottom:1px solid #eee;padding:.3rem .5rem;text-align:left;vertical-align:top}}
.pass,.ok{{color:#15803d;font-weight:600}} .fail,.failed,.bad{{color:#b91c1c;font-weight:600}} .not_applicable,.na,.running{{color:#6b7280}}
.decision{{font-size:1.3rem}} .banner{{padding:.6rem 1rem;border-radius:8px;background:#fee2e2}}
</style></head><body>
<h1>eu-ml-platform: the lifecycle, locally</h1>
<p class="sub">{html.escape(summary.get("started", ""))} · {summary.get("duration_s", 0):.0f} s in all
· preset <code>{html.escape(str(summary.get("preset")))}</code></p>
{banner}
<div class="cards">{cards}<div class='card'><b class='{badge}'>{html.escape(decision)}</b><span>promotion to dev</span></div></div>
<div class="grid2">
<section><h2>Training</h2>{line_chart("training loss", {"loss": loss}, x_label="step", y_label="loss")}
{line_chart("validation accuracy", {"validation accuracy": val}, x_label="step", y_label="accuracy")}</section>
<section><h2>Serving latency (real Triton server)</h2>
{latency_chart(serve.get("results") or [], serve.get("slo_p99_ms"))}
{f"<p>Smoke check: {html.escape(str(serve['check']))}</p>" if serve.get("check") else ""}</section>
</div>
{monitoring_section(summary.get("monitoring") or {})}
<h2>Promotion to dev: <span class="decision {badge}">{html.escape(decision)}</span></h2>
<ul>{"".join(f"<li>{html.escape(r)}</li>" for r in promotion.get("reasons", []))}</ul>
<table><tr><th>gate</th><th>status</th><th>measured</th><th>threshold</th><th>detail</th></tr>{gate_rows}</table>
<h2>Stages</h2>
<table><tr><th>#</th><th>stage</th><th>status</th><th>time</th><th>log</th></tr>{stage_rows}</table>
<h2>Reports</h2><ul>{link_items}</ul>
</body></html>
"""
