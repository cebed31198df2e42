import type { Env } from '@herald/config';
import { createTransport } from 'nodemailer';

/**
 * Herald's one way to send mail: SMTP through nodemailer. Sign-in links and invites (the account
 * service) and the approvals' email channel use it. Locally and in tests the SMTP server is
 * Mailpit (deploy/lib/mailpit.sh); in production, the operator's own (SMTP_URL).
 */

/** The mail settings, read by a component that sends mail (spread into its config). */
export function mailConfig(env: Env) {
  return {
    /**
     * smtp://[user:pass@]host:port (STARTTLS when the server offers it) or smtps:// (TLS from the
     * first byte). Credentials belong in the URL, so it is a secret.
     */
    smtpUrl: env.url('SMTP_URL', ['smtp:', 'smtps:'], 'smtp://127.0.0.1:11025'),
    /** The From header, e.g. `Herald <no-reply@example.com>`. */
    mailFrom: env.string('MAIL_FROM', 'Herald <no-reply@herald.localhost>'),
  };
}

export type MailConfig = ReturnType<typeof mailConfig>;

export interface Message {
  to: string;
  subject: string;
  /** The plain-text body; always sent. */
  text: string;
  /** An HTML alternative (already escaped by the caller). */
  html?: string;
  /**
   * The Message-ID, `<…@…>`: a message sent again after a lost acknowledgement carries the same
   * one, so receivers that deduplicate by it show it once. Default: nodemailer's random one.
   */
  messageId?: string;
}

export interface MailSender {
  /** Resolves once the SMTP server accepted the message; rejects when it did not. */
  send(message: Message): Promise<void>;
  close(): void;
}

export function createMailSender({ smtpUrl, mailFrom }: MailConfig): MailSender {
  // A pool keeps one connection warm across messages; timeouts bound a server that stalls.
  const transport = createTransport({
    url: smtpUrl,
    pool: true,
    maxConnections: 4,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  });
  return {
    async send(message) {
      await transport.sendMail({ from: mailFrom, ...message });
    },
    close() {
      transport.close();
    },
  };
}
