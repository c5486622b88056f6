// Time travel: filled in by the time-travel view.
import { h } from './dom.js';

export function show(main) {
  main.append(h('h1', {}, 'Time travel'), h('p', { class: 'muted' }, 'Loading…'));
}
