// The pieces the pages share: headings, filter forms, paging, list pages and operator buttons.

import { canAct, session } from './api.js';
import { actionButton, h } from './dom.js';

export const PAGE = 50;

export function title(text, ...extra) {
  return h('div', { class: 'title' }, h('h2', null, text), extra);
}

export function viewerNote() {
  return h(
    'p',
    { class: 'muted', hidden: canAct() },
    `You are logged in as ${session.role}: actions need the operator role.`,
  );
}

/** Re-run `fn` at most once per `ms` however many events ask for it. */
export function debounce(fn, ms) {
  let timer = null;
  const run = () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
  run.cancel = () => clearTimeout(timer);
  return run;
}

/** A filter form whose inputs are named after the API's query parameters. */
export function filterForm(fields, values, onApply) {
  const inputs = fields.map(([name, label, placeholder]) =>
    h('input', { name, id: `filter-${name}`, value: values[name] || '', placeholder: placeholder || '' }),
  );
  const form = h(
    'form',
    { class: 'filters' },
    fields.map(([, label], i) => h('label', null, label, inputs[i])),
    h('button', { type: 'submit' }, 'Apply'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const next = {};
    fields.forEach(([name], i) => {
      next[name] = inputs[i].value.trim();
    });
    onApply(next);
  });
  return form;
}

export function pager(total, offset, onMove) {
  if (total <= PAGE) return h('p', { class: 'muted' }, `${total} in all`);
  const last = Math.min(offset + PAGE, total);
  return h(
    'div',
    { class: 'pager' },
    h('button', { type: 'button', disabled: offset === 0, onclick: () => onMove(Math.max(0, offset - PAGE)) }, '‹ Previous'),
    ` ${offset + 1}–${last} of ${total} `,
    h('button', { type: 'button', disabled: last >= total, onclick: () => onMove(offset + PAGE) }, 'Next ›'),
  );
}

/**
 * A page of one list: a heading, a filter form whose inputs are named after the API's query
 * parameters, the list as `render(data)` draws it, and paging with `paged`. Returns `reload`.
 */
export function listPage(root, { heading, id, fields = [], paged = false, fetch, render, isCurrent }) {
  let filters = {};
  let offset = 0;
  const body = h('div', { id });
  async function load() {
    const data = await fetch(paged ? { ...filters, offset, limit: PAGE } : { ...filters });
    if (!isCurrent()) return;
    body.replaceChildren(
      render(data),
      paged
        ? pager(data.total, offset, (next) => {
            offset = next;
            reload();
          })
        : '',
    );
  }
  // a failed reload is already on screen as the notice of the request that failed
  const reload = () => load().catch(() => {});
  const form = fields.length
    ? filterForm(fields, filters, (next) => {
        filters = next;
        offset = 0;
        reload();
      })
    : '';
  root.append(...heading, form, body);
  return { load, reload };
}

/** An operator's button: runs `call`, tells how it went, then runs `after` (a reload). */
export function operatorAction(label, call, success, { notify, after, confirm = true }) {
  return actionButton(
    label,
    async () => {
      try {
        const answer = await call();
        notify(typeof success === 'function' ? success(answer) : success);
      } catch (err) {
        notify(err.message, 'error');
      }
      if (after) await after();
    },
    { confirm, disabled: !canAct() },
  );
}
