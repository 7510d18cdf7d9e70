// baton console: polls the JSON API and renders every schedule. No framework, no innerHTML:
// every value from the API goes into the page as text (textContent), so a schedule's name or a
// job's stderr can never become markup.
'use strict';

const POLL_MS = 2000;       // how often the page reads the API
const HISTORY_RUNS = 30;    // runs per timeline

const state = { allowControl: false, busy: false, timer: null, message: '', messageError: false };

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function setStatus(text, error) {
  const s = document.getElementById('status');
  s.textContent = text;
  s.classList.toggle('error', !!error);
}

async function getJSON(url) {
  const res = await fetch(url, { cache: 'no-store', credentials: 'omit' });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(url + ': ' + res.status + (body.error ? ' ' + body.error : ''));
  return body;
}

function ago(iso) {
  if (!iso) return '';
  const d = (Date.parse(iso) - Date.now()) / 1000;
  const a = Math.abs(d);
  if (a < 1) return 'now';
  const t = a < 60 ? Math.round(a) + 's' : a < 3600 ? Math.round(a / 60) + 'm' : Math.round(a / 3600) + 'h';
  return d < 0 ? t + ' ago' : 'in ' + t;
}

function when(iso) {
  return iso ? iso + ' (' + ago(iso) + ')' : 'none';
}

function addRow(dl, label, value) {
  dl.append(el('dt', null, label), el('dd', null, value));
}

function nodeName(nodes, contender) {
  const n = nodes.find((m) => m.contender_id === contender);
  return n ? n.id + ' (' + contender + ')' : contender;
}

function timeline(records) {
  const line = el('div', 'timeline');
  line.setAttribute('aria-label', 'last runs, oldest first');
  const runs = records.slice().reverse();
  let fence = null;
  for (const r of runs) {
    if (fence !== null && r.fence !== fence) {
      const mark = el('span', 'fence');
      mark.title = 'fence ' + fence + ' -> ' + r.fence;
      line.append(mark);
    }
    fence = r.fence;
    const box = el('span', 'run ' + String(r.outcome).replace(/[^a-z_]/g, ''));
    box.title = '#' + r.seq + ' ' + r.outcome + ' · planned ' + r.planned + ' · ' + r.trigger +
        ' · on ' + r.node + ' · fence ' + r.fence;
    line.append(box);
  }
  if (!runs.length) line.append(el('span', 'legend', 'no runs recorded'));
  return line;
}

function card(s, nodes, history) {
  const a = el('article', 'schedule');
  a.dataset.name = s.name;
  a.append(el('h2', null, s.name));
  const st = s.paused ? 'paused' : s.owner ? 'leading: ' + nodeName(nodes, s.owner.id) : 'no leader';
  a.append(el('span', 'state' + (s.paused ? ' paused' : s.owner ? '' : ' unowned'), st));
  const dl = el('dl');
  addRow(dl, 'trigger', s.trigger);
  addRow(dl, 'leader', s.owner ? nodeName(nodes, s.owner.id) : 'none');
  addRow(dl, 'fence', s.fence);
  if (s.owner) {
    addRow(dl, 'lease renews', when(s.owner.ttl_at));
    addRow(dl, 'others may take over', when(s.owner.transition_at));
  }
  addRow(dl, 'waiting', s.waiting_tracked ? (s.waiting.length ? s.waiting.join(', ') : 'none') : 'not tracked');
  if (s.paused) {
    const c = s.controls || {};
    addRow(dl, 'paused', 'by ' + (c.changed_by || '?') + (c.reason ? ': ' + c.reason : '') +
        (c.changed_at ? ', ' + ago(c.changed_at) : ''));
  }
  addRow(dl, 'next fire', when(s.next_fire) + (s.paused ? ', skipped while paused' : ''));
  const last = s.last_run;
  addRow(dl, 'last outcome', last ? last.outcome + (last.exit_status !== null ? ' (exit ' +
      last.exit_status + ')' : '') + ', ' + ago(last.ended || last.started || last.planned) +
      ', fence ' + last.fence : 'none recorded');
  if (s.consecutive_failures) addRow(dl, 'failures in a row', s.consecutive_failures);
  if (s.records_error) addRow(dl, 'history', 'unreadable: ' + s.records_error);
  a.append(dl);
  a.append(timeline(history));
  if (last && last.output) {
    a.append(el('div', 'legend', 'stderr of the last run' + (last.output_truncated ? ' (last bytes)' : '')));
    a.append(el('pre', 'stderr', last.output));
  }
  if (state.allowControl) {
    const c = el('div', 'controls');
    for (const action of ['pause', 'resume', 'trigger']) {
      const b = el('button', action, action);
      b.type = 'button';
      b.addEventListener('click', () => control(s.name, action));
      c.append(b);
    }
    a.append(c);
  }
  return a;
}

async function control(name, action) {
  const token = document.getElementById('token').value.trim();
  if (!token) {
    setStatus(action + ' ' + name + ': enter the control token first', true);
    return;
  }
  try {
    const res = await fetch('/api/v1/schedules/' + encodeURIComponent(name) + '/' + action, {
      method: 'POST', cache: 'no-store', credentials: 'omit',
      headers: { 'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json' },
      body: JSON.stringify(action === 'pause' ? { reason: 'from the console' } : {}),
    });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(res.status + ' ' + (body.error || ''));
    state.message = action + ' ' + name + ': done';
    state.messageError = false;
  } catch (e) {
    state.message = action + ' ' + name + ': ' + e.message;
    state.messageError = true;
  }
  setStatus(state.message, state.messageError);
  refresh();
}

async function refresh() {
  if (state.busy) return;
  state.busy = true;
  clearTimeout(state.timer);
  try {
    const node = await getJSON('/api/v1/node');
    state.allowControl = !!(node.console && node.console.allow_control);
    document.getElementById('control').hidden = !state.allowControl;
    document.getElementById('node').textContent = 'node ' + (node.id || node.contender_id) +
        ' · ' + node.backend.description + ' · baton ' + node.version +
        (node.clock_offset_ms !== null ? ' · clock offset ' + node.clock_offset_ms + ' ms' : '');
    const doc = await getJSON('/api/v1/schedules');
    const nodes = doc.nodes || [];
    const histories = await Promise.all(doc.schedules.map((s) =>
      getJSON('/api/v1/schedules/' + encodeURIComponent(s.name) + '/history?limit=' + HISTORY_RUNS)
        .then((h) => h.records, () => [])));
    const main = document.getElementById('schedules');
    main.replaceChildren(...doc.schedules.map((s, i) => card(s, nodes, histories[i])));
    main.setAttribute('aria-busy', 'false');
    const live = nodes.filter((n) => n.alive).length;
    setStatus(doc.schedules.length + ' schedules · ' + live + ' live nodes · updated ' +
        new Date().toLocaleTimeString() + (state.message ? ' · ' + state.message : ''),
        state.messageError);
    state.message = '';
  } catch (e) {
    setStatus('cannot read the API: ' + e.message, true);
  } finally {
    state.busy = false;
    state.timer = setTimeout(refresh, POLL_MS);
  }
}

document.addEventListener('DOMContentLoaded', refresh);
