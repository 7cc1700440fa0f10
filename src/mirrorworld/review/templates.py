# ruff: noqa: E501  (HTML templates: long lines are markup, not code)
"""The review app's pages (Jinja2, autoescaped), its stylesheet and its one script.

Kept as Python strings so the package needs no data files. The script does
two things only: keyboard shortcuts (every element with ``data-key`` answers
that key; ``data-action`` says how: ``click``, ``focus`` or ``cycle`` through a
select's options) and counting keystrokes and pastes in the reason box, which
the server uses to tell typed reasons from pasted ones. Pages work without it.
"""

from __future__ import annotations

__all__ = ["APP_CSS", "APP_JS", "TEMPLATES"]

APP_JS = r"""(function () {
  "use strict";
  function typing(el) {
    if (!el || !el.tagName) return false;
    if (el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    return el.tagName === "INPUT" && ["text", "password", "search", "number"].indexOf(el.type) >= 0;
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      var main = document.querySelector("form[data-main]");
      if (main) { e.preventDefault(); main.requestSubmit(); }
      return;
    }
    if (typing(t)) {
      if (e.key === "Escape") { e.preventDefault(); t.blur(); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "?") {
      var help = document.getElementById("help");
      if (help) { e.preventDefault(); help.hidden = !help.hidden; }
      return;
    }
    var nodes = document.querySelectorAll("[data-key]");
    for (var i = 0; i < nodes.length; i++) {
      var el = nodes[i];
      if (el.getAttribute("data-key") !== e.key) continue;
      e.preventDefault();
      var action = el.getAttribute("data-action") || "click";
      if (action === "focus") { el.focus(); }
      else if (action === "cycle") {
        el.selectedIndex = (el.selectedIndex + 1) % el.options.length;
        el.dispatchEvent(new Event("change", {bubbles: true}));
      } else { el.click(); }
      return;
    }
  });
  var reason = document.getElementById("reason");
  if (reason) {
    var keys = document.getElementById("reason_keys");
    var pasted = document.getElementById("reason_pasted");
    reason.addEventListener("keydown", function (e) {
      if (e.key.length === 1 || e.key === "Enter" || e.key === "Backspace") keys.value = String(Number(keys.value) + 1);
    });
    reason.addEventListener("paste", function () { pasted.value = "1"; });
    reason.addEventListener("drop", function () { pasted.value = "1"; });
  }
})();
"""

APP_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1f2328; background: #f6f8fa; }
header { background: #24292f; color: #fff; padding: .5rem 1rem; display: flex; gap: 1rem; align-items: center; }
header a, header button { color: #fff; text-decoration: none; background: none; border: 0; font: inherit; cursor: pointer; }
header .who { margin-left: auto; opacity: .8; }
main { max-width: 1100px; margin: 1rem auto; padding: 0 1rem; }
section { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; padding: .75rem 1rem; margin-bottom: 1rem; }
h1 { font-size: 1.3rem; } h2 { font-size: 1.05rem; margin-top: 0; }
table { border-collapse: collapse; width: 100%; } td, th { border-bottom: 1px solid #eaeef2; padding: .25rem .5rem;
  text-align: left; vertical-align: top; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; padding: .4rem; margin: .2rem 0;
  max-height: 16rem; overflow: auto; font-size: 13px; }
.msg { border-left: 3px solid #d0d7de; padding-left: .6rem; margin: .5rem 0; }
.msg.user { border-color: #2463eb; } .msg.assistant { border-color: #059669; }
.call.err summary { color: #b42318; }
.pass { color: #067647; font-weight: 600; } .fail { color: #b42318; font-weight: 600; }
.flash { background: #fff8c5; border: 1px solid #d4a72c; padding: .5rem 1rem; border-radius: 6px; margin-bottom: 1rem; }
.error { background: #ffebe9; border-color: #ff8182; }
kbd { border: 1px solid #aaa; border-bottom-width: 2px; border-radius: 3px; padding: 0 .3rem; font-size: 12px;
  background: #fff; }
.grade label { margin-right: 1rem; } textarea { width: 100%; min-height: 6rem; font: inherit; }
.chart { width: 100%; max-width: 640px; height: auto; background: #fff; }
.muted { color: #57606a; } .tag { display: inline-block; padding: 0 .4rem; border-radius: 8px; background: #eaeef2;
  font-size: 12px; margin-right: .2rem; }
#help { position: fixed; right: 1rem; bottom: 1rem; background: #fff; border: 1px solid #888; padding: .5rem 1rem;
  border-radius: 6px; box-shadow: 0 2px 8px #0003; }
button.primary { background: #1f883d; color: #fff; border: 1px solid #1a7f37; border-radius: 6px;
  padding: .3rem .9rem; font: inherit; cursor: pointer; }
button.primary kbd { color: #1f2328; }
"""

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{% block title %}{{ title }}{% endblock %} · mirrorworld review</title>
<link rel="stylesheet" href="/static/app.css"><script src="/static/app.js" defer></script></head>
<body>
<header><strong>mirrorworld review</strong>
{% if user %}<a href="/queue">Queue</a>
{% if user.can("adjudicator") %}<a href="/stats">Agreement</a><a href="/drift">Drift</a>{% endif %}
{% if user.can("admin") %}<a href="/reviewers">Reviewers</a>{% endif %}
<span class="who">{{ user.name }} ({{ user.role }})</span>
<form method="post" action="/logout"><input type="hidden" name="csrf" value="{{ csrf }}">
<button type="submit">Sign out</button></form>{% endif %}
</header>
<main>
{% if flash %}<div class="flash" id="flash">{{ flash }}</div>{% endif %}
{% block content %}{% endblock %}
</main>
<div id="help" hidden><strong>Keyboard</strong>
<table>{% block keys %}{% endblock %}<tr><td><kbd>?</kbd></td><td>show or hide this help</td></tr></table></div>
</body></html>
"""

_LOGIN = """{% extends "base.html" %}
{% block content %}<section><h1>Sign in</h1>
{% if error %}<div class="flash error" id="error">{{ error }}</div>{% endif %}
<form method="post" action="/login" data-main>
<input type="hidden" name="csrf" value="{{ login_csrf }}">
<p><label>Name <input name="name" id="name" autocomplete="username" autofocus required></label></p>
<p><label>Password <input name="password" id="password" type="password" autocomplete="current-password" required></label></p>
<p><button class="primary" type="submit" id="signin">Sign in</button></p>
</form></section>{% endblock %}
"""

_QUEUE = """{% extends "base.html" %}
{% block content %}
<section><h1>Your queue</h1>
{% if user.paused %}<p class="flash error" id="paused">You are paused from the queue: {{ user.paused_reason }}.
An admin can resume you.</p>
{% else %}
<p>{{ done }} graded{% if waiting is not none %}, {{ waiting }} items still need a grade{% endif %}.</p>
<form method="post" action="/take"><input type="hidden" name="csrf" value="{{ csrf }}">
<button class="primary" type="submit" id="next" data-key="n">{% if open_item %}Continue item {{ open_item }}{% else %}Next item{% endif %} <kbd>n</kbd></button>
</form>{% endif %}
</section>
{% if recent %}<section><h2>Your recent grades</h2><table id="recent">
<tr><th>item</th><th>task</th><th>your grade</th><th>seconds</th></tr>
{% for r in recent %}<tr><td><a href="/item/{{ r.item_id }}">{{ r.item_id }}</a></td><td>{{ r.task }}</td>
<td class="{{ 'pass' if r.passed else 'fail' }}">{{ 'pass' if r.passed else 'fail' }}</td><td>{{ '%.0f'|format(r.seconds) }}</td></tr>
{% endfor %}</table></section>{% endif %}
{% endblock %}
{% block keys %}<tr><td><kbd>n</kbd></td><td>next item</td></tr>{% endblock %}
"""

_EPISODE = """
<section><h2>Task</h2><p id="instruction">{{ view.instruction }}</p>
<p class="muted">{{ item.task_id }}{% if show_agent %} · agent {{ item.agent }}{% endif %}</p></section>
<section><h2>Conversation</h2>
{% for step in view.steps %}<div class="msg {{ step.role }}"><strong>{{ step.role }}</strong>
{% if step.text %}<pre>{{ step.text }}</pre>{% endif %}
{% for c in step.calls %}<details class="call{{ '' if c.ok else ' err' }}" open><summary>step: <code>{{ c.name }}</code>{{ '' if c.ok else ' (error)' }}</summary>
<pre>{{ c.arguments }}</pre><div class="muted">result</div><pre>{{ c.result }}</pre></details>{% endfor %}
</div>{% endfor %}</section>
<section><h2>State changes</h2>
{% if view.replay_error %}<p class="flash error">The episode could not be replayed: {{ view.replay_error }}</p>
{% elif not view.changes %}<p id="no-changes">The episode changed nothing.</p>
{% else %}<table id="changes"><tr><th>row</th><th>change</th><th>field</th><th>before</th><th>after</th></tr>
{% for ch in view.changes %}{% for f in ch.fields %}<tr>{% if loop.first %}<td rowspan="{{ ch.fields|length }}">{{ ch.table }} {{ ch.pk }}</td>
<td rowspan="{{ ch.fields|length }}">{{ ch.kind }}</td>{% endif %}<td>{{ f[0] }}</td><td>{{ f[1] }}</td><td>{{ f[2] }}</td></tr>{% endfor %}{% endfor %}
</table>{% endif %}</section>
"""

_VERDICT = """{% if verdict is none %}<section id="verdict"><h2>Verifier verdict: none</h2>
<p>The episode errored before it could be graded{% if item.error %}: {{ item.error }}{% endif %}.</p></section>
{% else %}<section id="verdict"><h2>Verifier verdict: <span class="{{ 'pass' if verdict.passed else 'fail' }}">{{ 'pass' if verdict.passed else 'fail' }}</span></h2>
<table>{% for ref in item.checks %}<tr><td>{{ ref.label }}</td><td class="{{ 'pass' if ref.verifier else 'fail' }}">{{ 'pass' if ref.verifier else 'fail' }}</td></tr>{% endfor %}</table>
{% if verdict.evidence %}<ul>{% for e in verdict.evidence %}<li>{{ e }}</li>{% endfor %}</ul>{% endif %}
</section>{% endif %}"""

_ITEM = (
    """{% extends "base.html" %}
{% block content %}
<h1>Item {{ item.id }}</h1>
"""
    + _EPISODE
    + """
{% if mode == "grade" %}
<section class="grade"><h2>Your grade</h2>
<form method="post" action="/item/{{ item.id }}/review" data-main id="grade-form">
<input type="hidden" name="csrf" value="{{ csrf }}">
<p><label><input type="radio" name="verdict" value="pass" id="v-pass" data-key="p" required> Pass <kbd>p</kbd></label>
<label><input type="radio" name="verdict" value="fail" id="v-fail" data-key="f"> Fail <kbd>f</kbd></label></p>
<table id="rubric"><tr><th>check (optional)</th><th></th></tr>
{% for ref in item.checks %}<tr><td>{% if loop.index <= 9 %}<kbd>{{ loop.index }}</kbd> {% endif %}{{ ref.label }}</td>
<td><select name="rubric_{{ loop.index0 }}" id="rubric_{{ loop.index0 }}"{% if loop.index <= 9 %} data-key="{{ loop.index }}" data-action="cycle"{% endif %}>
<option value="">—</option><option value="pass">pass</option><option value="fail">fail</option></select></td></tr>{% endfor %}
</table>
<p><label for="reason">Reason <kbd>r</kbd></label>
<textarea name="reason" id="reason" maxlength="5000" data-key="r" data-action="focus"></textarea>
<input type="hidden" name="reason_keys" id="reason_keys" value="0"><input type="hidden" name="reason_pasted" id="reason_pasted" value="0"></p>
<p><label><input type="checkbox" name="hacking" id="flag-hacking" data-key="h"> reward hacking (meets the metric, misses the intent) <kbd>h</kbd></label><br>
<label><input type="checkbox" name="task_wrong" id="flag-task" data-key="w"> the task is wrong <kbd>w</kbd></label><br>
<label><input type="checkbox" name="edge_case" id="flag-edge" data-key="e"> edge case <kbd>e</kbd></label></p>
<p><button class="primary" type="submit" id="submit" data-key="s">Submit grade <kbd>s</kbd></button>
<span class="muted">or <kbd>Ctrl</kbd>+<kbd>Enter</kbd>; the verifier's verdict is shown after you grade.</span></p>
</form></section>
{% else %}
{% if mine %}<section id="your-grade"><h2>Your grade: <span class="{{ 'pass' if mine.passed else 'fail' }}">{{ 'pass' if mine.passed else 'fail' }}</span></h2>
{% if mine.reason %}<p>{{ mine.reason }}</p>{% endif %}
{% for f in mine.flags %}<span class="tag">{{ f }}</span>{% endfor %}
{% if item.gold_answer is not none %}<p id="gold">A known-answer item: the answer is <strong>{{ 'pass' if item.gold_answer else 'fail' }}</strong>
{{ '— you got it right.' if item.gold_answer == mine.passed else '— your grade differs.' }}</p>{% endif %}
</section>{% endif %}
"""
    + _VERDICT
    + """
{% if reviews is not none %}<section id="all-reviews"><h2>All grades</h2><table>
<tr><th>reviewer</th><th>grade</th><th>rubric</th><th>flags</th><th>reason</th><th>seconds</th></tr>
{% for r in reviews %}<tr><td>{{ r.reviewer }}</td><td class="{{ 'pass' if r.passed else 'fail' }}">{{ 'pass' if r.passed else 'fail' }}</td>
<td>{% for k, v in r.rubric.items() %}<span class="tag">{{ k }}: {{ 'pass' if v else 'fail' }}</span>{% endfor %}</td>
<td>{% for f in r.flags %}<span class="tag">{{ f }}</span>{% endfor %}</td><td>{{ r.reason }}</td><td>{{ '%.0f'|format(r.seconds) }}</td></tr>{% endfor %}
</table></section>
<section id="adjudication"><h2>Adjudication</h2>
{% if adjudication %}<p>Settled as <strong class="{{ 'pass' if adjudication.passed else 'fail' }}">{{ 'pass' if adjudication.passed else 'fail' }}</strong> by {{ adjudication.by }}: {{ adjudication.reason }}</p>{% endif %}
<form method="post" action="/item/{{ item.id }}/adjudicate"><input type="hidden" name="csrf" value="{{ csrf }}">
<label><input type="radio" name="verdict" value="pass" required> pass</label> <label><input type="radio" name="verdict" value="fail"> fail</label>
<textarea name="reason" maxlength="5000" placeholder="why"></textarea><button type="submit" id="adjudicate">Settle</button></form>
{% if user.can("admin") and adjudication %}<form method="post" action="/item/{{ item.id }}/gold"><input type="hidden" name="csrf" value="{{ csrf }}">
<button type="submit" id="make-gold">Use as a gold item (answer: {{ 'pass' if adjudication.passed else 'fail' }})</button></form>{% endif %}
</section>{% endif %}
{% if mine %}<form method="post" action="/take"><input type="hidden" name="csrf" value="{{ csrf }}">
<button class="primary" type="submit" id="next" data-key="n">Next item <kbd>n</kbd></button></form>{% endif %}
{% endif %}
{% endblock %}
{% block keys %}{% if mode == "grade" %}<tr><td><kbd>p</kbd> / <kbd>f</kbd></td><td>pass / fail</td></tr>
<tr><td><kbd>1</kbd>–<kbd>9</kbd></td><td>cycle a check: — / pass / fail</td></tr>
<tr><td><kbd>r</kbd></td><td>write the reason (<kbd>Esc</kbd> leaves the box)</td></tr>
<tr><td><kbd>h</kbd> <kbd>w</kbd> <kbd>e</kbd></td><td>flag: reward hacking, task is wrong, edge case</td></tr>
<tr><td><kbd>s</kbd>, <kbd>Ctrl</kbd>+<kbd>Enter</kbd></td><td>submit</td></tr>{% else %}<tr><td><kbd>n</kbd></td><td>next item</td></tr>{% endif %}{% endblock %}
"""
)

_EST = """{% macro est(e) %}{% if e.value is none %}<span class="muted">n/a</span>{% else %}{{ '%.3f'|format(e.value) }}
{% if e.ci[0] is not none %}<span class="muted">[{{ '%.3f'|format(e.ci[0]) }}, {{ '%.3f'|format(e.ci[1]) }}]</span>{% endif %}{% endif %}{% endmacro %}"""

_STATS = (
    """{% extends "base.html" %}
"""
    + _EST
    + """
{% block content %}
<h1>Agreement</h1>
{% if s.incomparable %}<section id="incomparable" class="warning"><p><strong>Warning:</strong> these runs come from world builds that differ in {{ s.incomparable|join(", ") }}; the figures pool verdicts that mean different things.</p></section>{% endif %}
<section><p id="summary"><span id="n-reviews">{{ s.reviews }}</span> grades of <span id="n-items">{{ s.items_reviewed }}</span> items by {{ s.reviewers }} reviewers;
{{ s.adjudicated }} adjudicated, {{ s.unresolved }} ties unresolved. Intervals: {{ (s.bootstrap.level * 100)|round|int }} % percentile bootstrap, {{ s.bootstrap.resamples }} resamples.</p></section>
<section id="overall"><h2>Verifier vs human verdict</h2>
{% set v = s.verifier_vs_human %}<table><tr><th>items</th><th>agreement</th><th>Cohen's kappa</th><th>Krippendorff's alpha</th><th>Gwet's AC1</th></tr>
<tr><td id="vh-n">{{ v.n }}</td><td>{{ est(v.agreement) }}</td><td>{{ est(v.kappa) }}</td><td>{{ est(v.alpha) }}</td><td>{{ est(v.ac1) }}</td></tr></table>
<h2>Confusion matrix</h2><table id="confusion"><tr><th></th><th>human pass</th><th>human fail</th></tr>
<tr><th>verifier pass</th><td>{{ v.confusion.verifier_pass_human_pass }}</td><td>{{ v.confusion.verifier_pass_human_fail }}</td></tr>
<tr><th>verifier fail</th><td>{{ v.confusion.verifier_fail_human_pass }}</td><td>{{ v.confusion.verifier_fail_human_fail }}</td></tr></table></section>
<section><h2>Human vs human</h2>{% set h = s.human_vs_human %}
<table><tr><th>items</th><th>grades</th><th>agreement</th><th>Cohen's kappa (pairs)</th><th>Fleiss' kappa</th><th>Krippendorff's alpha</th><th>Gwet's AC1</th></tr>
<tr><td id="hh-n">{{ h.n }}</td><td>{{ h.ratings }}</td><td>{{ est(h.agreement) }}</td><td>{{ est(h.kappa_cohen) }}</td><td>{{ est(h.kappa_fleiss) }}</td><td>{{ est(h.alpha) }}</td><td>{{ est(h.ac1) }}</td></tr></table></section>
{% for title, key in (("By task family", "by_family"), ("By verifier check", "by_check")) %}
<section><h2>{{ title }}</h2><table><tr><th></th><th>items</th><th>agreement</th><th>kappa</th><th>alpha</th><th>AC1</th><th>human–human AC1</th></tr>
{% for name, g in s[key].items() %}<tr><td>{{ name }}</td><td>{{ g.verifier_vs_human.n }}</td><td>{{ est(g.verifier_vs_human.agreement) }}</td>
<td>{{ est(g.verifier_vs_human.kappa) }}</td><td>{{ est(g.verifier_vs_human.alpha) }}</td><td>{{ est(g.verifier_vs_human.ac1) }}</td><td>{{ est(g.human_vs_human.ac1) }}</td></tr>{% endfor %}
</table></section>{% endfor %}
<section id="disagreements"><h2>Disagreements ({{ s.disagreements|length }})</h2><table>
<tr><th>item</th><th>task</th><th>verifier</th><th>human</th><th>votes</th><th>kind</th><th>adjudicated</th></tr>
{% for d in s.disagreements %}<tr><td><a href="/item/{{ d.item }}">{{ d.item }}</a></td><td>{{ d.task }}</td>
<td>{{ 'pass' if d.verifier else 'fail' }}</td><td>{{ 'tie' if d.human is none else ('pass' if d.human else 'fail') }}</td>
<td>{{ d.votes.pass }}–{{ d.votes.fail }}</td><td>{% for k in d.kinds %}<span class="tag">{{ k }}</span>{% endfor %}</td>
<td>{{ '—' if d.adjudicated is none else ('pass' if d.adjudicated else 'fail') }}</td></tr>{% endfor %}</table></section>
<p class="muted"><a href="/stats.json">JSON</a></p>
{% endblock %}
"""
)

_DRIFT = """{% extends "base.html" %}
{% block content %}
<h1>Drift</h1>
<section id="alarms"><h2>Alarms</h2>{% if not d.alarms %}<p id="no-alarms">None.</p>{% else %}<ul>
{% for a in d.alarms %}<li class="fail">{{ a.alarm }}: {{ a|tojson }}</li>{% endfor %}</ul>{% endif %}</section>
<section><h2>Agreement with the verifier per window</h2>{{ charts.windows|safe }}
<table><tr><th>window</th><th>grades</th><th>agreement</th><th>AC1</th><th>kappa</th></tr>{% for w in d.windows %}
<tr><td>{{ w.label }}</td><td>{{ w.n }}</td><td>{{ w.agreement }}</td><td>{{ w.ac1 if w.ac1 is not none else '—' }}</td><td>{{ w.kappa if w.kappa is not none else '—' }}</td></tr>{% endfor %}</table></section>
<section><h2>Agreement per verifier version</h2>{{ charts.versions|safe }}
<table><tr><th>version</th><th>grades</th><th>agreement</th><th>AC1</th></tr>{% for v in d.versions %}
<tr><td><code>{{ v.version[:12] }}</code></td><td>{{ v.n }}</td><td>{{ v.agreement }}</td><td>{{ v.ac1 if v.ac1 is not none else '—' }}</td></tr>{% endfor %}</table></section>
<section><h2>Verifier scores across runs</h2>{{ charts.psi|safe }}
<table><tr><th>run</th><th>agent</th><th>episodes</th><th>pass rate</th><th>score PSI</th><th>test p</th><th>reward PSI</th><th>test p</th></tr>
{% for r in d.runs %}<tr><td>{{ r.run }}</td><td>{{ r.agent }}</td><td>{{ r.episodes }}</td><td>{{ r.pass_rate }}</td>
{% if r.reference %}<td colspan="4" class="muted">reference for {{ r.agent }}</td>{% else %}
<td>{{ r.score.psi }}</td><td>{{ '%.3g'|format(r.score.p_value) }} ({{ r.score.test }})</td><td>{{ r.reward.psi }}</td><td>{{ '%.3g'|format(r.reward.p_value) }} ({{ r.reward.test }})</td>{% endif %}</tr>{% endfor %}
</table></section>
{% endblock %}
"""

_REVIEWERS = """{% extends "base.html" %}
{% block content %}
<h1>Reviewers</h1>
<section><table id="quality"><tr><th>reviewer</th><th>role</th><th>grades</th><th>gold</th><th>median s</th><th>peer agreement</th>
<th>peer kappa</th><th>agrees with verifier</th><th>flags</th><th>status</th></tr>
{% for q in quality %}<tr id="reviewer-{{ q.reviewer_id }}"><td>{{ q.name }}</td><td>{{ q.role }}</td><td>{{ q.reviews }}</td>
<td>{% if q.gold %}{{ q.gold_correct }}/{{ q.gold }}{% else %}—{% endif %}</td>
<td>{{ '—' if q.median_seconds is none else '%.0f'|format(q.median_seconds) }}</td>
<td>{{ '—' if q.peer_agreement is none else '%.2f'|format(q.peer_agreement) }}</td>
<td>{{ '—' if q.peer_kappa is none else '%.2f'|format(q.peer_kappa) }}</td>
<td>{{ '—' if q.verifier_agreement is none else '%.2f'|format(q.verifier_agreement) }}</td>
<td>{% for rule, ev in q.flags %}<span class="tag" title="{{ ev }}">{{ rule }}</span>{% endfor %}</td>
<td>{% if q.paused %}<span class="fail">paused</span>: {{ q.paused_reason }}
<form method="post" action="/reviewers/{{ q.reviewer_id }}/resume"><input type="hidden" name="csrf" value="{{ csrf }}"><button type="submit">Resume</button></form>
{% else %}active<form method="post" action="/reviewers/{{ q.reviewer_id }}/pause"><input type="hidden" name="csrf" value="{{ csrf }}"><button type="submit">Pause</button></form>{% endif %}</td></tr>
{% endfor %}</table></section>
<section><h2>Add a reviewer</h2><form method="post" action="/reviewers"><input type="hidden" name="csrf" value="{{ csrf }}">
<label>Name <input name="name" required></label> <label>Password <input name="password" type="password" minlength="8" required></label>
<label>Role <select name="role"><option>reviewer</option><option>adjudicator</option><option>admin</option></select></label>
<button type="submit">Add</button></form></section>
{% endblock %}
"""

_ERROR = """{% extends "base.html" %}
{% block content %}<section><h1>{{ status }}</h1><p class="flash error" id="error">{{ message }}</p>
<p><a href="/">Back</a></p></section>{% endblock %}
"""

TEMPLATES = {
    "base.html": _BASE,
    "login.html": _LOGIN,
    "queue.html": _QUEUE,
    "item.html": _ITEM,
    "stats.html": _STATS,
    "drift.html": _DRIFT,
    "reviewers.html": _REVIEWERS,
    "error.html": _ERROR,
    # Fragments, not pages: the episode (task, conversation, state changes) and the verifier's verdict, as
    # the item page shows them; the run viewer (mirrorworld.view) includes them in its own pages.
    "episode.html": _EPISODE,
    "verdict.html": _VERDICT,
}
