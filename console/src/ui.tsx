import { type ReactNode, useEffect, useId, useRef } from 'react';

import { describeError } from './api.js';

/** Shared pieces of the pages: an error line, dates, and a modal <dialog>. */

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {describeError(error)}
    </p>
  );
}

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

export function When({ at, never = 'Never' }: { at: string | null; never?: string }) {
  return at ? <time dateTime={at}>{dateFormat.format(new Date(at))}</time> : <>{never}</>;
}

/**
 * A modal dialog: the native <dialog> opened with showModal(), so the browser traps focus inside,
 * makes the rest inert, closes it on Escape (onClose) and returns focus to what opened it.
 */
export function Dialog({ open, title, onClose, children }: { open: boolean; title: string; onClose: () => void; children: ReactNode }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return (
    <dialog ref={ref} aria-labelledby={titleId} onClose={onClose}>
      <h2 id={titleId}>{title}</h2>
      {open ? children : null}
    </dialog>
  );
}
