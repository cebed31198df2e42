import { decodeCursor, newestFirstPage, type Pool } from '@herald/db';
import { randomId } from '@herald/domain';
import { HeraldError, invalidFields, type FieldProblem } from '@herald/errors';
import { implementService } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import { TemplateServiceService, type Template } from '@herald/proto/herald/campaign/v1/templates';

import * as store from './store.js';

/** /templates: reusable content with {{placeholders}}, newest-first pages of a workspace's own. */

const DEFAULT_PAGE = 100;
const MAX_PAGE = 100;

/**
 * A placeholder: `{{name}}`, or `{{name|fallback}}` whose fallback is used when no value is given.
 * Names are letters, digits, `_` and `.` (e.g. `{{firstName}}`, `{{subscriber.externalId}}`); a
 * fallback is up to 200 characters without `|`, `{` or `}`.
 */
const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_.]{0,63})\s*(?:\|([^|{}]{0,200}))?\}\}/g;

/** Problems of the `{{...}}` in `text`: every `{{` must open a well-formed placeholder. */
export function placeholderProblem(text: string): string | undefined {
  const rest = text.replace(PLACEHOLDER, '');
  if (rest.includes('{{') || rest.includes('}}')) return 'has a malformed placeholder: write {{name}} or {{name|fallback}}';
  return undefined;
}

const notFound = (id: string): HeraldError => new HeraldError('not_found', `No template ${id}.`, { title: 'Not found' });

function toTemplate(row: store.TemplateRow): Template {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    title: row.title,
    body: row.body,
    iconUrl: row.icon_url ?? '',
    imageUrl: row.image_url ?? '',
    actionUrl: row.action_url ?? '',
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** Checks the placeholders of the fields given; every problem in one 400. */
function checkContent(content: Partial<store.TemplateContent>): void {
  const problems: FieldProblem[] = [];
  for (const [column, field] of [
    ['title', 'title'],
    ['body', 'body'],
    ['action_url', 'actionUrl'],
  ] as const) {
    const value = content[column];
    const problem = value ? placeholderProblem(value) : undefined;
    if (problem) problems.push({ field, in: 'body', problem });
  }
  if (problems.length > 0) throw invalidFields('body', problems);
}

const orNull = (value: string): string | null => (value === '' ? null : value);

export function templateHandlers(pool: Pool, logger: Logger) {
  return implementService(
    TemplateServiceService,
    {
      async listTemplates({ workspaceId, limit, cursor }) {
        const pageSize = limit <= 0 ? DEFAULT_PAGE : Math.min(limit, MAX_PAGE);
        const after = cursor ? decodeCursor(cursor) : undefined;
        if (cursor && !after) throw invalidFields('querystring', [{ field: 'cursor', in: 'querystring', problem: 'is not a cursor returned by this endpoint' }]);
        const { rows, nextCursor } = await newestFirstPage(pageSize, (count) => store.listTemplates(pool, workspaceId, after, count));
        return { templates: rows.map(toTemplate), nextCursor };
      },

      async createTemplate(request) {
        const content: store.TemplateContent = {
          name: request.name,
          title: request.title,
          body: request.body,
          icon_url: orNull(request.iconUrl),
          image_url: orNull(request.imageUrl),
          action_url: orNull(request.actionUrl),
        };
        checkContent(content);
        const row = await store.insertTemplate(pool, `tpl_${randomId(24)}`, request.workspaceId, content);
        logger.info({ workspaceId: row.workspace_id, templateId: row.id }, 'template created');
        return { template: toTemplate(row) };
      },

      async getTemplate({ workspaceId, templateId }) {
        const row = await store.findTemplate(pool, workspaceId, templateId);
        if (!row) throw notFound(templateId);
        return { template: toTemplate(row) };
      },

      async updateTemplate(request) {
        const changes: Partial<store.TemplateContent> = {
          ...(request.name !== undefined ? { name: request.name } : {}),
          ...(request.title !== undefined ? { title: request.title } : {}),
          ...(request.body !== undefined ? { body: request.body } : {}),
          ...(request.iconUrl !== undefined ? { icon_url: orNull(request.iconUrl) } : {}),
          ...(request.imageUrl !== undefined ? { image_url: orNull(request.imageUrl) } : {}),
          ...(request.actionUrl !== undefined ? { action_url: orNull(request.actionUrl) } : {}),
        };
        checkContent(changes);
        const row = Object.keys(changes).length === 0 ? await store.findTemplate(pool, request.workspaceId, request.templateId) : await store.updateTemplate(pool, request.workspaceId, request.templateId, changes);
        if (!row) throw notFound(request.templateId);
        return { template: toTemplate(row) };
      },

      async deleteTemplate({ workspaceId, templateId }) {
        if (!(await store.deleteTemplate(pool, workspaceId, templateId))) throw notFound(templateId);
        logger.info({ workspaceId, templateId }, 'template deleted');
        return {};
      },
    },
    logger,
  );
}
