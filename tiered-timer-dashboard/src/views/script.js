(function () {
  var ms = Number(document.body.getAttribute('data-refresh-ms'));
  function busy() {
    var a = document.activeElement;
    return document.querySelector('input[type=checkbox]:checked') || (a && a.tagName === 'INPUT');
  }
  function tick() { if (busy()) { setTimeout(tick, ms); } else { location.reload(); } }
  if (ms > 0) setTimeout(tick, ms);
  var all = document.getElementById('select-all');
  if (all) all.addEventListener('change', function () {
    document.querySelectorAll('input[name=id]').forEach(function (b) { b.checked = all.checked; });
  });
})();
