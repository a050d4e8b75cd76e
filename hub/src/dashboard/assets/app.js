// Flotilla dashboard: follows the hub's live feed (Server-Sent Events on /events) and updates
// what the page shows. Values are written with textContent only, never as markup.
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
  var url = '/events';
  if (!transitions && counts.length === 0) {
    if (list.length === 0) { return; }
    url += '?clusters=' + encodeURIComponent(list.join(','));
  }
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
