import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { CONTENT_LIMITS } from '@herald/domain';
import type { Template } from '@herald/proto/herald/campaign/v1/templates';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { Nullable, orNull, PageOf, PageQuery, withErrors } from '../schemas/common.js';
import { ActionUrl, BodyAs, HttpUrl, Name, PLACEHOLDERS, TitleAs } from '../schemas/content.js';

/** /templates: reusable notification content (dashboard keys). */


const TemplateRecord = Type.Object({
  id: Type.String(),
  name: Type.String(),
  title: Type.String({ description: PLACEHOLDERS }),
  body: Type.String({ description: PLACEHOLDERS }),
  iconUrl: Nullable(Type.String()),
  imageUrl: Nullable(Type.String()),
  actionUrl: Nullable(Type.String()),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});

const CreateBody = Type.Object(
  {
    name: Name,
    title: TitleAs(PLACEHOLDERS),
    body: BodyAs(PLACEHOLDERS),
    iconUrl: Type.Optional(Nullable(HttpUrl('Small icon'))),
    imageUrl: Type.Optional(Nullable(HttpUrl('Large image'))),
    actionUrl: Type.Optional(Nullable(ActionUrl)),
  },
  { additionalProperties: false },
);
const PatchBody = Type.Partial(CreateBody, { additionalProperties: false, minProperties: 1 });
const Params = Type.Object({ templateId: Type.String({ minLength: 1, maxLength: CONTENT_LIMITS.templateId }) });

function toRecord(template: Template | undefined) {
  if (!template) throw new Error('campaign service returned no template');
  return {
    id: template.id,
    name: template.name,
    title: template.title,
    body: template.body,
    iconUrl: orNull(template.iconUrl),
    imageUrl: orNull(template.imageUrl),
    actionUrl: orNull(template.actionUrl),
    createdAt: template.createdAt,
    updatedAt: template.updatedAt,
  };
}

export const templateRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    const config = { access: { scope: 'templates' as const } };
    const ref = (request: { params: { templateId: string } } & Parameters<typeof principalOf>[0]) => ({
      workspaceId: principalOf(request).workspaceId,
      templateId: request.params.templateId,
    });

    app.get(
      '/templates',
      {
        config,
        schema: {
          tags: ['Templates'],
          operationId: 'listTemplates',
          summary: 'List templates, newest first',
          querystring: Type.Object(PageQuery, { additionalProperties: false }),
          response: withErrors({ 200: PageOf(TemplateRecord) }),
        },
      },
      async (request) => {
        const { templates, nextCursor } = await clients.templates.listTemplates({
          workspaceId: principalOf(request).workspaceId,
          limit: request.query.limit,
          cursor: request.query.cursor ?? '',
        });
        return { data: templates.map(toRecord), hasMore: nextCursor !== '', nextCursor: orNull(nextCursor) };
      },
    );

    app.post(
      '/templates',
      { config, schema: { tags: ['Templates'], operationId: 'createTemplate', summary: 'Create a template', body: CreateBody, response: withErrors({ 201: TemplateRecord }) } },
      async (request, reply) => {
        const { name, title, body, iconUrl, imageUrl, actionUrl } = request.body;
        const { template } = await clients.templates.createTemplate({
          workspaceId: principalOf(request).workspaceId,
          name,
          title,
          body,
          iconUrl: iconUrl ?? '',
          imageUrl: imageUrl ?? '',
          actionUrl: actionUrl ?? '',
        });
        return reply.code(201).send(toRecord(template));
      },
    );

    app.get(
      '/templates/:templateId',
      { config, schema: { tags: ['Templates'], operationId: 'getTemplate', summary: 'Read a template', params: Params, response: withErrors({ 200: TemplateRecord }) } },
      async (request) => toRecord((await clients.templates.getTemplate(ref(request))).template),
    );

    app.patch(
      '/templates/:templateId',
      {
        config,
        schema: {
          tags: ['Templates'],
          operationId: 'updateTemplate',
          summary: 'Change a template (campaigns already created from it keep their content)',
          params: Params,
          body: PatchBody,
          response: withErrors({ 200: TemplateRecord }),
        },
      },
      async (request) => {
        const { name, title, body, iconUrl, imageUrl, actionUrl } = request.body;
        // null clears an optional URL: the service takes an empty string for that.
        const { template } = await clients.templates.updateTemplate({
          ...ref(request),
          ...(name !== undefined ? { name } : {}),
          ...(title !== undefined ? { title } : {}),
          ...(body !== undefined ? { body } : {}),
          ...(iconUrl !== undefined ? { iconUrl: iconUrl ?? '' } : {}),
          ...(imageUrl !== undefined ? { imageUrl: imageUrl ?? '' } : {}),
          ...(actionUrl !== undefined ? { actionUrl: actionUrl ?? '' } : {}),
        });
        return toRecord(template);
      },
    );

    app.delete(
      '/templates/:templateId',
      { config, schema: { tags: ['Templates'], operationId: 'deleteTemplate', summary: 'Delete a template', params: Params, response: withErrors({ 204: Type.Null({ description: 'No content' }) }) } },
      async (request, reply) => {
        await clients.templates.deleteTemplate(ref(request));
        return reply.code(204).send(null);
      },
    );
  };
