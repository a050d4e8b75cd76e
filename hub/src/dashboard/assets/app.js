// Flotilla dashboard: follows the hub's live feed (Server-Sent Events on /events) and updates
// what the page shows. Values are written with textContent only, never as markup; a page of a
// controller's object (data-follow) that is told it changed reads itself again and swaps its
// <main> for the new one (markup the server escaped, parsed inert: no script runs from it).
(function () {
  'use strict';
  var CLASSES = {
    Available: 'ok', Unavailable: 'bad', Unknown: 'unknown', Pending: 'pending', Denied: 'bad'
  };
  var dot = document.getElementById('live');
  var counts = document.querySelectorAll('[data-count]');
  var transitions = document.getElementById('transitions');
  var names = {};
  document.querySelectorAll('[data-cluster]').forEach(function (el) {
    names[el.getAttribute('data-cluster')] = true;
  });
  var list = Object.keys(names);
  var follows = [];
  document.querySelectorAll('[data-follow]').forEach(function (el) {
    el.getAttribute('data-follow').split(' ').forEach(function (f) { if (f) { follows.push(f); } });
  });
  var params = [];
  if (!transitions && counts.length === 0) {
    if (list.length === 0 && follows.length === 0) { return; }
    if (list.length > 0) { params.push('clusters=' + encodeURIComponent(list.join(','))); }
  }
  if (follows.length > 0) { params.push('follow=' + encodeURIComponent(follows.join(' '))); }
  var url = '/events' + (params.length ? '?' + params.join('&') : '');
  function badge(word) {
    var span = document.createElement('span');
    span.className = 'badge ' + (CLASSES[word] || 'neutral');
    span.textContent = word;
    return span;
  }
  var source = new EventSource(url);
  var opened = false;
  source.onopen = function () {
    // A second open is a reconnect: events were missed, so the page is read again.
    if (opened) { location.reload(); return; }
    opened = true;
    if (dot) { dot.className = 'live on'; dot.title = 'live: updates arrive as they happen'; }
    document.body.setAttribute('data-live', 'on');
  };
  source.onerror = function () {
    if (dot) { dot.className = 'live off'; dot.title = 'live updates interrupted; retrying'; }
    document.body.setAttribute('data-live', 'off');
  };
  source.addEventListener('reset', function () { source.close(); location.reload(); });
  source.addEventListener('cluster', function (e) {
    var d = JSON.parse(e.data);
    if (!d.to) { return; }
    document.querySelectorAll('[data-cluster]').forEach(function (row) {
      if (row.getAttribute('data-cluster') !== d.cluster) { return; }
      row.querySelectorAll('[data-field="availability"]').forEach(function (cell) {
        cell.replaceChildren(badge(d.to));
      });
    });
  });
  // A followed object changed: read the page again, at most once a second, one read at a time.
  var refreshing = false, again = false, last = 0;
  function refresh() {
    if (refreshing) { again = true; return; }
    var wait = last + 1000 - Date.now();
    if (wait > 0) { refreshing = true; setTimeout(function () { refreshing = false; refresh(); }, wait); return; }
    refreshing = true; again = false; last = Date.now();
    fetch(location.href, { credentials: 'same-origin', headers: { Accept: 'text/html' } })
      .then(function (r) {
        if (!r.ok || r.redirected) { throw new Error('status ' + r.status); }
        return r.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, 'text/html').querySelector('main');
        var main = document.querySelector('main');
        if (fresh && main) {
          main.replaceWith(document.importNode(fresh, true));
          document.body.setAttribute('data-refreshed', String(Number(document.body.getAttribute('data-refreshed') || 0) + 1));
        }
      })
      .catch(function () { location.reload(); })
      .finally(function () { refreshing = false; if (again) { refresh(); } });
  }
  source.addEventListener('changed', function () { refresh(); });
  source.addEventListener('summary', function (e) {
    var d = JSON.parse(e.data);
    counts.forEach(function (el) {
      var k = el.getAttribute('data-count');
      if (Object.prototype.hasOwnProperty.call(d, k)) { el.textContent = String(d[k]); }
    });
  });
  source.addEventListener('transition', function (e) {
    if (!transitions) { return; }
    var d = JSON.parse(e.data);
    var li = document.createElement('li');
    var time = document.createElement('time');
    time.textContent = d.at;
    var a = document.createElement('a');
    a.href = '/clusters/' + encodeURIComponent(d.cluster);
    a.textContent = d.cluster;
    li.append(time, ' ', a, ' ', d.from ? badge(d.from) : 'new', ' → ', d.to ? badge(d.to) : 'deleted');
    transitions.prepend(li);
    while (transitions.children.length > 20) { transitions.lastElementChild.remove(); }
    var none = document.getElementById('no-transitions');
    if (none) { none.remove(); }
  });
})();
