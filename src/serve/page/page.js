(function () {
  'use strict';
  var token = new URLSearchParams(location.search).get('token') || '';
  var body = document.body;
  var $ = function (id) { return document.getElementById(id); };
  var S = { seq: 0, graph: -1, stories: [], byId: {}, rows: {}, counts: {}, summary: {}, activity: {}, controls: false };
  var open = null, logES = null;

  function api(p) {
    return token ? p + (p.indexOf('?') < 0 ? '?' : '&') + 'token=' + encodeURIComponent(token) : p;
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function dur(s) {
    s = Math.max(0, Math.round(s));
    var h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), x = s % 60;
    return (h ? h + 'h ' : '') + (h || m ? m + 'm ' : '') + x + 's';
  }
  function usd(x) { return '$' + (x || 0).toFixed(2); }
  function now() { return Date.now() / 1000; }
  function status(word) { return el('span', 'status st-' + word, word); }

  // The stories' table and the graph's nodes, one row and node per story.
  function drawStories() {
    var tb = $('stories').tBodies[0];
    tb.textContent = '';
    S.rows = {};
    S.stories.forEach(function (s) {
      var tr = el('tr');
      tr.setAttribute('data-id', s.id);
      tr.setAttribute('data-status', s.status);
      tr.appendChild(el('td', '', s.id));
      tr.appendChild(el('td', '', s.title));
      var td = el('td');
      td.appendChild(status(s.status));
      tr.appendChild(td);
      tr.onclick = function () { openStory(s.id); };
      tb.appendChild(tr);
      S.rows[s.id] = tr;
    });
    filter();
  }
  function setStatus(id, word) {
    var s = S.byId[id];
    if (!s) return;
    s.status = word;
    var tr = S.rows[id];
    if (tr) {
      tr.setAttribute('data-status', word);
      var td = tr.cells[2];
      td.textContent = '';
      td.appendChild(status(word));
    }
    var node = document.querySelector('#graph a.node[data-id="' + CSS.escape(id) + '"]');
    if (node) node.setAttribute('class', node.getAttribute('class').replace(/\bs-[a-z]+/, 's-' + word));
    if (open === id) { $('p-status').className = 'status st-' + word; $('p-status').textContent = word; }
  }
  function loadGraph() {
    fetch(api('/api/dag.svg')).then(function (r) { return r.text(); }).then(function (t) {
      var g = $('graph');
      g.innerHTML = t;
      g.querySelectorAll('a.node').forEach(function (a) {
        var id = a.getAttribute('data-id');
        if (S.byId[id]) setStatus(id, S.byId[id].status);
        a.addEventListener('click', function (e) { e.preventDefault(); openStory(id); });
      });
      body.setAttribute('data-nodes', g.querySelectorAll('a.node').length);
    });
  }
  function filter() {
    var q = $('filter').value.toLowerCase();
    S.stories.forEach(function (s) {
      var tr = S.rows[s.id];
      if (tr) tr.style.display = q && tr.textContent.toLowerCase().indexOf(q) < 0 ? 'none' : '';
    });
  }
  $('filter').addEventListener('input', filter);

  function drawCounts() {
    var c = $('counts');
    c.textContent = '';
    var total = S.stories.length;
    var card = function (label, n) {
      var d = el('div', 'card');
      d.appendChild(el('b', '', n));
      d.appendChild(document.createTextNode(label));
      c.appendChild(d);
    };
    card('stories', total);
    ['done', 'running', 'landing', 'review', 'pending', 'failed', 'blocked'].forEach(function (k) {
      if (S.counts[k]) card(k, S.counts[k]);
    });
  }

  function drawSummary() {
    var m = S.summary || {};
    var line = m.run ? 'run ' + m.run + (m.live ? ' · running' : m.exit_code !== undefined && m.exit_code !== null ? ' · ended, exit ' + m.exit_code : ' · ended') : 'no run yet';
    if (m.live && m.jobs) line += ' · -j ' + m.jobs;
    if (m.started) line += ' · started ' + new Date(m.started * 1000).toLocaleTimeString();
    $('runline').textContent = line;
    body.setAttribute('data-live', m.live ? '1' : '0');
    // Spend against the budget.
    var sp = $('spend');
    sp.textContent = 'spent ' + usd(m.cost_usd) + ' · ' + (m.tokens || 0).toLocaleString() + ' tokens';
    if (m.budget_usd) {
      var f = Math.min(1, (m.cost_usd || 0) / m.budget_usd);
      var bar = el('span', 'bar' + ((m.cost_usd || 0) >= m.budget_usd ? ' over' : ''));
      var i = el('i');
      i.style.width = (f * 100).toFixed(1) + '%';
      bar.appendChild(i);
      sp.appendChild(document.createTextNode(' of ' + usd(m.budget_usd) + ' '));
      sp.appendChild(bar);
    }
    if (m.budget_tokens) sp.appendChild(document.createTextNode(' · token budget ' + m.budget_tokens.toLocaleString()));
    // Pauses, with their countdowns.
    var pl = $('pauses');
    pl.textContent = '';
    (m.pauses || []).forEach(function (p) {
      var words = p.why === 'pause' ? 'paused (ralph pause): no new attempt starts until resume'
        : p.why === 'drain' ? 'draining (ralph drain): running work finishes, nothing new starts'
        : 'paused: ' + p.why.replace('_', ' ');
      var li = el('li', '', words + (p.agent ? ' (' + p.agent + ')' : ''));
      if (p.until) {
        var t = el('span', 'countdown');
        t.setAttribute('data-until', p.until);
        li.appendChild(document.createTextNode(' · resumes in '));
        li.appendChild(t);
      }
      pl.appendChild(li);
    });
    if ((m.held || []).length) pl.appendChild(el('li', '', 'held (until ralph release): ' + m.held.join(', ')));
    // Running attempts.
    var tb = $('running').tBodies[0];
    tb.textContent = '';
    (m.running || []).forEach(function (r) {
      var tr = el('tr');
      tr.setAttribute('data-id', r.story);
      tr.appendChild(el('td', '', r.story));
      tr.appendChild(el('td', '', r.attempt));
      // A cluster attempt's node once known; a local one has none; a
      // racing story's candidates are its rows under Races.
      var race = (m.races || []).filter(function (x) { return x.story === r.story && x.attempt === r.attempt; })[0];
      tr.appendChild(el('td', '', race ? 'best of ' + race.candidates.length : r.node ? r.agent + ' on ' + r.node : r.agent));
      var e = el('td', 'elapsed');
      e.setAttribute('data-since', r.since);
      tr.appendChild(e);
      var lines = S.activity[r.story] || [];
      tr.appendChild(el('td', 'act', lines.slice(-2).join('\n')));
      tr.onclick = function () { openStory(r.story); };
      tb.appendChild(tr);
    });
    $('idle').hidden = (m.running || []).length > 0;
    drawRaces(m.races || []);
    // The merge queue.
    var lq = $('landq');
    lq.textContent = '';
    // A story of a chain: the candidate that adds it, where it runs, and
    // the stories its merge holds before it (issue 34).
    var landing = m.landing || [];
    landing.forEach(function (id, i) {
      var v = (m.validating || []).filter(function (c) { return c.stories[c.stories.length - 1] === id; })[0];
      var what = landing.length > 1 ? ' — landing, chain position ' + (i + 1) + ' of ' + landing.length : ' — landing now';
      if (!v) {
        lq.appendChild(el('li', '', id + what + ' (merge, checks)'));
        return;
      }
      var li = el('li', '', id + what + ' — validating in ' + v.slot +
        (v.stories.length > 1 ? ' with ' + v.stories.slice(0, -1).join(', ') + ' before it' : '') + ', ');
      li.setAttribute('data-story', id);
      var e = el('span', 'elapsed');
      e.setAttribute('data-since', v.since);
      li.appendChild(e);
      lq.appendChild(li);
    });
    (m.land_queue || []).forEach(function (id) { lq.appendChild(el('li', '', id + ' — waiting')); });
    if (!landing.length && !(m.land_queue || []).length) lq.appendChild(el('li', 'muted', 'empty'));
    tick();
  }
  // Best of N (issue 36): each race as one story's row, then a row per
  // candidate; a race stays once over, its winner marked.
  function drawRaces(races) {
    var tb = $('races').tBodies[0];
    tb.textContent = '';
    races.forEach(function (r) {
      var won = r.candidates.filter(function (c) { return c.state === 'won'; })[0];
      var head = el('tr', 'race');
      head.setAttribute('data-id', r.story);
      head.setAttribute('data-over', r.over ? '1' : '0');
      var td = el('td', '', r.story + ' · attempt ' + r.attempt + ' · best of ' + r.candidates.length + ' — ' +
        (won ? 'won by candidate ' + won.k : r.over ? 'no candidate passed' : 'racing'));
      td.colSpan = 6;
      head.appendChild(td);
      head.onclick = function () { openStory(r.story); };
      tb.appendChild(head);
      r.candidates.forEach(function (c) {
        var tr = el('tr', 'cand');
        tr.setAttribute('data-story', r.story);
        tr.setAttribute('data-k', c.k);
        tr.setAttribute('data-state', c.state);
        [c.k, c.node ? c.agent + ' on ' + c.node : c.agent, c.model || ''].forEach(function (v) { tr.appendChild(el('td', '', v)); });
        var st = el('td');
        st.appendChild(status(c.state));
        tr.appendChild(st);
        var t = el('td');
        if (c.ended) t.textContent = dur(c.ended - c.since);
        else t.setAttribute('data-since', c.since);
        tr.appendChild(t);
        var lg = el('td');
        var a = el('a', 'log', 'log');
        a.href = '#';
        a.onclick = function (e) { e.preventDefault(); openStory(r.story, { attempt: r.attempt, candidate: c.k }); };
        lg.appendChild(a);
        tr.appendChild(lg);
        tb.appendChild(tr);
      });
    });
    $('races-sec').hidden = !races.length;
  }
  function tick() {
    document.querySelectorAll('[data-since]').forEach(function (e) {
      e.textContent = dur(now() - parseFloat(e.getAttribute('data-since')));
    });
    document.querySelectorAll('[data-until]').forEach(function (e) {
      e.textContent = dur(parseFloat(e.getAttribute('data-until')) - now());
    });
  }
  setInterval(tick, 1000);

  function drawControls() {
    document.querySelectorAll('button[data-cmd],button[data-story-cmd]').forEach(function (b) {
      b.disabled = !S.controls || !token;
      b.title = b.disabled ? (token ? 'no run is going on' : 'open the URL ralph printed (with its token) to steer') : b.title;
    });
  }

  function applyState(s) {
    S.seq = s.seq;
    S.stories = s.stories;
    S.byId = {};
    s.stories.forEach(function (x) { S.byId[x.id] = x; });
    S.counts = s.counts;
    S.summary = s.summary;
    S.activity = s.activity || {};
    S.controls = s.controls;
    $('project').textContent = s.project;
    document.title = 'ralph · ' + s.project + ' · live';
    drawStories();
    drawCounts();
    drawSummary();
    drawControls();
    if (s.graph !== S.graph) { S.graph = s.graph; loadGraph(); }
    body.setAttribute('data-seq', S.seq);
    body.setAttribute('data-ready', '1');
  }
  // A change numbered at or below the snapshot's is already in it.
  function fresh(e) {
    var n = parseInt(e.lastEventId, 10);
    if (!(n > S.seq)) return false;
    S.seq = n;
    body.setAttribute('data-seq', n);
    return true;
  }

  function connect() {
    var es = new EventSource(api('/api/events'));
    es.onopen = function () { $('conn').textContent = 'live'; $('conn').className = 'badge live'; };
    es.onerror = function () { $('conn').textContent = 'reconnecting'; $('conn').className = 'badge down'; };
    es.addEventListener('state', function (e) { applyState(JSON.parse(e.data)); });
    es.addEventListener('status', function (e) {
      if (!fresh(e)) return;
      var d = JSON.parse(e.data);
      Object.keys(d.changes).forEach(function (id) { setStatus(id, d.changes[id]); });
      S.counts = d.counts;
      drawCounts();
    });
    es.addEventListener('record', function (e) {
      if (!fresh(e)) return;
      var d = JSON.parse(e.data);
      if (d.record.ev === 'attempt_start') delete S.activity[d.record.story];
      S.summary = d.summary;
      drawSummary();
      if (open && d.record.story === open) loadStory(open);
    });
    es.addEventListener('summary', function (e) {
      if (!fresh(e)) return;
      S.summary = JSON.parse(e.data).summary;
      drawSummary();
    });
    es.addEventListener('activity', function (e) {
      if (!fresh(e)) return;
      var d = JSON.parse(e.data);
      var a = S.activity[d.id] || (S.activity[d.id] = []);
      a.push(d.text);
      if (a.length > 8) a.shift();
      var tr = document.querySelector('#running tr[data-id="' + CSS.escape(d.id) + '"]');
      if (tr) tr.cells[4].textContent = a.slice(-2).join('\n');
    });
    es.addEventListener('graph', function (e) {
      if (!fresh(e)) return;
      fetch(api('/api/state')).then(function (r) { return r.json(); }).then(applyState);
    });
    es.addEventListener('controls', function (e) {
      if (!fresh(e)) return;
      S.controls = JSON.parse(e.data).controls;
      drawControls();
    });
    // The run is over and its server going: no reconnecting to it.
    es.addEventListener('end', function (e) {
      if (!fresh(e)) return;
      es.close();
      $('conn').textContent = 'ended';
      $('conn').className = 'badge';
      S.summary = JSON.parse(e.data).summary;
      S.controls = false;
      drawSummary();
      drawControls();
    });
    es.addEventListener('control', function (e) {
      if (!fresh(e)) return;
      var d = JSON.parse(e.data);
      showReply(d.request, d.reply);
    });
  }

  function showReply(req, reply) {
    var r = $('reply');
    r.setAttribute('data-ok', reply.ok ? 'true' : 'false');
    r.setAttribute('data-cmd', req.cmd || '');
    r.textContent = (req.cmd || '') + ': ' + (reply.message || '') + (reply.hint ? ' (' + reply.hint + ')' : '');
  }
  function send(req) {
    fetch(api('/api/control'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Ralph-Token': token },
      body: JSON.stringify(req)
    }).then(function (r) { return r.json(); }).then(function (reply) { showReply(req, reply); },
      function (err) { showReply(req, { ok: false, message: String(err) }); });
  }
  document.querySelectorAll('button[data-cmd]').forEach(function (b) {
    b.addEventListener('click', function () {
      var cmd = b.getAttribute('data-cmd');
      var req = { cmd: cmd };
      if (cmd === 'jobs') req.n = parseInt($('jobs').value, 10) || 1;
      send(req);
    });
  });
  document.querySelectorAll('button[data-story-cmd]').forEach(function (b) {
    b.addEventListener('click', function () {
      if (!open) return;
      var req = { cmd: b.getAttribute('data-story-cmd'), id: open };
      if (req.cmd === 'note') { req.text = $('note').value; if (!req.text) return; $('note').value = ''; }
      send(req);
    });
  });

  // The per-story panel: its attempts and its agent's log as it grows.
  function loadStory(id) {
    fetch(api('/api/stories/' + encodeURIComponent(id))).then(function (r) { return r.json(); }).then(function (d) {
      if (open !== id) return;
      $('p-title').textContent = d.id + ' ' + d.title;
      $('p-status').className = 'status st-' + d.status;
      $('p-status').textContent = d.status;
      var rec = d.record || {};
      $('p-run').textContent = d.running ? 'attempt ' + d.running.attempt + ' running (' + d.running.agent + ')' :
        (rec.note ? 'a note waits for its next attempt' : '');
      var tb = $('attempts').tBodies[0];
      tb.textContent = '';
      (rec.history || []).forEach(function (h) {
        var tr = el('tr');
        [h.number, h.kind || 'first', h.agent || '', h.outcome, dur(h.duration_secs || 0), usd(h.cost_usd), h.reason || '']
          .forEach(function (v) { tr.appendChild(el('td', '', v)); });
        tb.appendChild(tr);
      });
    });
  }
  // `which`: a racing candidate's log ({attempt, candidate}), else the
  // story's latest attempt's.
  function openStory(id, which) {
    open = id;
    $('panel').hidden = false;
    $('log').textContent = '';
    loadStory(id);
    if (logES) logES.close();
    var q = which ? '?attempt=' + which.attempt + '&candidate=' + which.candidate : '';
    logES = new EventSource(api('/api/stories/' + encodeURIComponent(id) + '/log' + q));
    var log = $('log');
    var put = function (lines, replace) {
      var stick = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      if (replace) log.textContent = '';
      log.appendChild(document.createTextNode(lines.join('\n') + (lines.length ? '\n' : '')));
      while (log.childNodes.length > 400) log.removeChild(log.firstChild);
      if (stick || replace) log.scrollTop = log.scrollHeight;
    };
    logES.addEventListener('tail', function (e) {
      var d = JSON.parse(e.data);
      $('p-log').textContent = d.attempt ? 'attempt ' + d.attempt + (which ? ', candidate ' + which.candidate : '') : 'no attempt yet';
      put(d.lines, true);
    });
    logES.addEventListener('lines', function (e) { put(JSON.parse(e.data).lines, false); });
  }
  $('close').onclick = function () { open = null; $('panel').hidden = true; if (logES) { logES.close(); logES = null; } };

  connect();
})();
