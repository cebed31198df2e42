import { useMutation } from '@tanstack/react-query';
import { type ReactNode, useEffect, useId, useRef } from 'react';

import { describeError } from './api.js';
import { Link } from './router.js';

/** Shared pieces of the pages: an error line, dates, a table, a modal <dialog> and a confirmation. */

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {describeError(error)}
    </p>
  );
}

/** A comma-separated list as typed ("vip, beta,"): its items, trimmed, empty ones dropped. */
export const splitList = (text: string): string[] => text.split(',').map((item) => item.trim()).filter(Boolean);

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

export function When({ at, never = 'Never' }: { at: string | null; never?: string }) {
  return at ? <time dateTime={at}>{dateFormat.format(new Date(at))}</time> : <>{never}</>;
}

/** A table with its (visually hidden) caption and column headers; `children` are its rows. */
export function Table({ caption, columns, children }: { caption: string; columns: string[]; children: ReactNode }) {
  return (
    <table>
      <caption className="visually-hidden">{caption}</caption>
      <thead>
        <tr>
          {columns.map((column) => (
            <th key={column} scope="col">
              {column}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{children}</tbody>
    </table>
  );
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

interface ConfirmProps<T> {
  /** What the action is about; the dialog is open while there is one. */
  target: T | undefined;
  title: string;
  /** The button that does it (and the action's name). */
  action: string;
  describe: (target: T) => ReactNode;
  run: (target: T) => Promise<unknown>;
  /** After it succeeded (e.g. invalidate the list it changed). */
  onDone: () => void;
  onClose: () => void;
}

/** A destructive action asks first: what it does, its button, Cancel; the API's error if it fails. */
export function ConfirmDialog<T>({ target, title, action, describe, run, onDone, onClose }: ConfirmProps<T>) {
  const mutation = useMutation({
    mutationFn: run,
    onSuccess: () => {
      onDone();
      close();
    },
  });
  const close = () => {
    mutation.reset();
    onClose();
  };
  return (
    <Dialog open={target !== undefined} title={title} onClose={close}>
      {target === undefined ? null : <p>{describe(target)}</p>}
      <ErrorNote error={mutation.error} />
      <div className="actions">
        <button type="button" className="danger" disabled={mutation.isPending} onClick={() => target !== undefined && mutation.mutate(target)}>
          {action}
        </button>
        <button type="button" className="secondary" onClick={close}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}

/** A detail view's top: the link back to its list and its heading, focused when the view opens (as a page change focuses the page's). */
export function DetailHeading({ back, backLabel, title, focusKey }: { back: string; backLabel: string; title: string; focusKey: string }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [focusKey]);
  return (
    <>
      <p>
        <Link to={back}>{backLabel}</Link>
      </p>
      <h2 ref={heading} tabIndex={-1}>
        {title}
      </h2>
    </>
  );
}
