import { createHash } from 'node:crypto';

import type { FastifyReply, FastifyRequest } from 'fastify';

/** A body built once at startup, served with a validator so clients re-fetch cheaply; it changes only with a deploy. */
export class StaticBody {
  readonly etag: string;

  constructor(
    readonly body: string,
    readonly contentType: string,
  ) {
    this.etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
  }

  send(request: FastifyRequest, reply: FastifyReply, varyAccept = false): FastifyReply {
    reply.header('cache-control', 'public, max-age=300').header('etag', this.etag);
    if (varyAccept) reply.header('vary', 'Accept');
    if (request.headers['if-none-match'] === this.etag) return reply.code(304).send();
    return reply.type(this.contentType).send(this.body);
  }
}
