// Offline docs site (tools/site/build.py): typeset the pandoc-style math spans with the local KaTeX copy.
(function () {
  function typeset(root) {
    if (!window.katex) return;
    root.querySelectorAll('span.math').forEach(function (el) {
      if (el.getAttribute('data-typeset')) return;
      var display = el.classList.contains('display');
      var tex = el.textContent.trim().replace(/^\\[(\[]/, '').replace(/\\[)\]]$/, '');
      try {
        katex.render(tex, el, { displayMode: display, throwOnError: false, output: 'htmlAndMathml' });
      } catch (e) {
        el.classList.add('katex-error'); el.title = String(e);
      }
      el.setAttribute('data-typeset', '1');
    });
  }
  window.mtpLitTypeset = typeset;
  typeset(document.body);
})();
