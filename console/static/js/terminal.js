// Terminal: filled in by the terminal view (conversations and blocks).
import { h } from './dom.js';

export function show(main) {
  main.append(h('h1', {}, 'Terminal'), h('p', { class: 'muted' }, 'Loading…'));
}
