// drafts.js: a half-filled form kept in localStorage, so a reload or a
// daemon restart loses nothing. A draft carries the request id its submit
// will use; it is dropped once the daemon acknowledged that submit.

const PREFIX = 'cmlab.draft.';

export function loadDraft(key) {
  try { return JSON.parse(localStorage.getItem(PREFIX + key) || 'null'); } catch { return null; }
}

export function saveDraft(key, draft) {
  localStorage.setItem(PREFIX + key, JSON.stringify(draft));
}

export function clearDraft(key) {
  localStorage.removeItem(PREFIX + key);
}
