# ruff: noqa: E501  (HTML templates: long lines are markup, not code)
"""The run viewer's pages (Jinja2, autoescaped) and its stylesheet.

The episode page includes the review app's own fragments
(:data:`mirrorworld.review.templates.TEMPLATES` ``episode.html`` and
``verdict.html``), so an episode reads the same in both apps; the verdict
comes first here (nobody grades blind in the viewer). The pages hold
links only: no form, no script (the Content-Security-Policy allows none).
"""

from __future__ import annotations

from mirrorworld.review.templates import APP_CSS
from mirrorworld.review.templates import TEMPLATES as REVIEW_TEMPLATES

__all__ = ["TEMPLATES", "VIEW_CSS"]

VIEW_CSS = (
    APP_CSS
    + """
.status { display: inline-block; padding: 0 .45rem; border-radius: 8px; font-size: 13px; font-weight: 600; }
.status.passed { background: #dafbe1; color: #067647; } .status.failed { background: #ffebe9; color: #b42318; }
.status.errored { background: #fff8c5; color: #7d4e00; }
dl.about { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; margin: .3rem 0 .6rem; font-size: 14px; }
dl.about dt { color: #57606a; } dl.about dd { margin: 0; word-break: break-word; }
table.figures td { font-size: 1.15rem; font-weight: 600; } table.figures th { font-weight: normal; color: #57606a; }
nav.filters { margin: .3rem 0 .6rem; } nav.filters a { margin-right: .6rem; } nav.filters a.on { font-weight: 700; }
nav.pager { display: flex; gap: 1.2rem; margin: .2rem 0 .8rem; }
td.flags .tag, td.fam { white-space: nowrap; } .note { font-size: 13px; }
h1 .status { vertical-align: middle; }
"""
)

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }} · mirrorworld view</title>
<link rel="stylesheet" href="/static/view.css"></head>
<body>
<header><strong>mirrorworld view</strong><a href="/">Runs</a>{% block nav %}{% endblock %}<span class="who">read-only</span></header>
<main>
{% block content %}{% endblock %}
</main>
</body></html>
"""

_FIGURES = """{% macro pct(x) %}{{ '—' if x is none else '%.1f %%'|format(x * 100) }}{% endmacro %}
{% macro figures(r) %}<table class="figures"><tr><th>planned</th><th>recorded</th><th>graded</th><th>passed</th><th>errored</th><th>pass rate</th><th>flagged</th></tr>
<tr><td class="planned">{{ '—' if r.planned is none else r.planned }}</td><td class="recorded">{{ r.rows|length }}</td><td class="graded">{{ r.graded }}</td>
<td class="passed">{{ r.passed }}</td><td class="errored">{{ r.errored }}</td><td class="pass-rate">{{ pct(r.pass_rate) }}</td><td class="flagged">{{ r.flagged }}</td></tr></table>
<p class="muted note">The pass rate is over graded episodes; errored episodes (a failure of the infrastructure, the world or the verifier) are counted beside it, never as failures.
Flagged: the verdict notes a broken rule, a judge's objection, repeated calls or restored rows, or an audit-run detector fired.</p>
{% if r.audit_error %}<p class="muted note audit-error">No audit-run flags: {{ r.audit_error }}</p>{% endif %}{% endmacro %}
"""

_INDEX = (
    """{% extends "base.html" %}
"""
    + _FIGURES
    + """
{% block content %}
<h1>Runs</h1>
{% for card in cards %}{% set r = card.run %}
<section class="run" id="run-{{ card.number }}">
<h2><a href="/run/{{ card.number }}">{{ r.name }}</a></h2>
<dl class="about">{% for label, text in r.about() %}<dt>{{ label }}</dt><dd>{{ text }}</dd>{% endfor %}</dl>
{{ figures(r) }}
{{ card.chart|safe }}
{% set ungraded = r.families()|selectattr("graded", "equalto", 0)|map(attribute="name")|list %}
{% if ungraded %}<p class="muted note ungraded">No bar: no graded episode in {{ ungraded[:20]|join(", ") }}{% if ungraded|length > 20 %} and {{ ungraded|length - 20 }} more families{% endif %}.</p>{% endif %}
<p><a href="/run/{{ card.number }}">all episodes</a> · <a href="/run/{{ card.number }}?status=failed" class="to-failed">failed</a>
· <a href="/run/{{ card.number }}?status=errored">errored</a> · <a href="/run/{{ card.number }}?flagged=1">flagged</a></p>
</section>
{% endfor %}
{% endblock %}
"""
)

_RUN = (
    """{% extends "base.html" %}
"""
    + _FIGURES
    + """
{% block content %}
<h1>{{ run.name }}</h1>
<section><dl class="about">{% for label, text in run.about() %}<dt>{{ label }}</dt><dd>{{ text }}</dd>{% endfor %}</dl>
{{ figures(run) }}</section>
<section><h2>Families</h2>{{ chart|safe }}
<table id="families"><tr><th>family</th><th>episodes</th><th>graded</th><th>passed</th><th>errored</th><th>pass rate</th></tr>
{% for f, href in families %}<tr><td class="fam"><a href="{{ href }}">{{ f.name }}</a></td><td>{{ f.episodes }}</td><td>{{ f.graded }}</td>
<td>{{ f.passed }}</td><td>{{ f.errored }}</td><td>{{ pct(f.pass_rate) }}</td></tr>{% endfor %}</table></section>
<section><h2>Episodes</h2>
<nav class="filters" id="filters">status:
{% for label, href, on in status_links %}<a href="{{ href }}" id="status-{{ label }}"{% if on %} class="on"{% endif %}>{{ label }}</a>{% endfor %}
· <a href="{{ flagged_link[0] }}" id="flagged"{% if flagged_link[1] %} class="on"{% endif %}>flagged only</a>
{% if family_shown is not none %}· family <strong id="family">{{ family_shown }}</strong> (<a href="{{ all_families }}">all families</a>){% endif %}
</nav>
<p id="count"><span id="n-shown">{{ selected }}</span> of {{ run.rows|length }} episodes{% if pages > 1 %} · page {{ page }} of {{ pages }}{% endif %}</p>
{% if rows %}<table id="episodes"><tr><th>#</th><th>task</th><th>family</th><th>trial</th><th>status</th><th>reward</th><th>steps</th><th>flags</th><th>failure</th></tr>
{% for e in rows %}<tr class="ep" data-status="{{ e.status }}" data-index="{{ e.index }}"><td><a href="/run/{{ number }}/episode/{{ e.index }}{{ query }}">{{ e.index }}</a></td>
<td><a href="/run/{{ number }}/episode/{{ e.index }}{{ query }}">{{ e.task_id }}</a></td><td>{{ e.family }}</td><td>{{ e.trial }}</td>
<td><span class="status {{ e.status }}">{{ e.status }}</span></td><td>{{ '%.2f'|format(e.reward) }}</td><td>{{ e.steps }}</td>
<td class="flags">{% for f in e.flags %}<span class="tag">{{ f }}</span>{% endfor %}</td><td class="muted">{{ e.failure or '' }}</td></tr>{% endfor %}
</table>{% else %}<p id="none">No episode matches these filters.</p>{% endif %}
{% if pages > 1 %}<nav class="pager">{% if prev_page %}<a href="{{ prev_page }}" id="prev-page">← previous page</a>{% endif %}{% if next_page %}<a href="{{ next_page }}" id="next-page">next page →</a>{% endif %}</nav>{% endif %}
</section>
{% endblock %}
"""
)

_EPISODE = """{% extends "base.html" %}
{% block content %}
<nav class="pager">{% if prev %}<a href="{{ prev }}" id="prev">← previous</a>{% endif %}
<a href="{{ back }}" id="back">episode list{% if filtered %} (filtered){% endif %}</a>
{% if next %}<a href="{{ next }}" id="next">next →</a>{% endif %}</nav>
<h1>Episode {{ row.index }} <span class="status {{ row.status }}" id="status">{{ row.status }}</span></h1>
<section id="episode-meta"><table>
<tr><th>run</th><td><a href="/run/{{ number }}">{{ run.name }}</a></td></tr>
<tr><th>task</th><td>{{ row.task_id }}</td></tr><tr><th>family</th><td>{{ row.family }}</td></tr>
<tr><th>trial</th><td>{{ row.trial }}</td></tr><tr><th>reward</th><td>{{ '%.3f'|format(row.reward) }}</td></tr>
<tr><th>steps</th><td>{{ row.steps }}</td></tr><tr><th>seconds</th><td>{{ '%.3f'|format(seconds) }}</td></tr>
{% if row.flags %}<tr><th>flags</th><td id="flags">{% for f in row.flags %}<span class="tag">{{ f }}</span>{% endfor %}</td></tr>{% endif %}
{% if row.failure %}<tr><th>failure</th><td id="failure" class="fail">{{ row.failure }}</td></tr>{% endif %}
{% if guards %}<tr><th>guards</th><td id="guards">{% for k, v in guards %}<span class="tag">{{ k }}: {{ v }}</span>{% endfor %}</td></tr>{% endif %}
</table></section>
{% include "review/verdict.html" %}
{% include "review/episode.html" %}
{% if omitted %}<p class="muted note" id="omitted">Not shown (too long for a page): {{ omitted|join(", ") }}; <code>mirrorworld show</code> prints the whole episode.</p>{% endif %}
{% endblock %}
"""

_ERROR = """{% extends "base.html" %}
{% block content %}<section><h1>{{ status }}</h1><p class="flash error" id="error">{{ message }}</p>
<p><a href="/">Back to the runs</a></p></section>{% endblock %}
"""

TEMPLATES = {
    "base.html": _BASE,
    "index.html": _INDEX,
    "run.html": _RUN,
    "episode.html": _EPISODE,
    "error.html": _ERROR,
    "review/episode.html": REVIEW_TEMPLATES["episode.html"],
    "review/verdict.html": REVIEW_TEMPLATES["verdict.html"],
}
"""The viewer's pages by name, with the review app's episode and verdict fragments under ``review/``."""
