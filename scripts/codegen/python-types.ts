/**
 * herald_sdk's request and response shapes (TypedDicts) from the OpenAPI document. Each public
 * name says where its shape is (see `locate`), as sdks/sdk/src/types.ts does for the JS SDK;
 * a shape met inside another takes the name of the first equal shape listed here, or else its
 * parent's name and its own field's (SendResult.limits would be SendResultLimits).
 */
import { literals, locate, resolve, type OpenApiDocument, type Schema } from './openapi.ts';

/** `[name, where]`, or `[name, where, fields left out]` for a shape that is part of a request. */
type Entry = readonly [name: string, where: string, omit?: readonly string[]];

const NAMES: readonly Entry[] = [
  // ---- Account ----
  ['Site', 'getSite'],
  ['Plan', 'getIdentity.plan'],
  ['IdentityKey', 'getIdentity.key'],
  ['Workspace', 'getIdentity.workspace'],
  ['Identity', 'getIdentity'],
  ['ChannelCounts', 'getChannels.site'],
  ['KeyOwnerChannels', 'getChannels.keyOwner'],
  ['Channels', 'getChannels'],
  ['Machine', 'listMachines.machines[]'],
  ['MachineReport', 'body:reportMachine'],
  // ---- Notifications ----
  ['SendRequest', 'body:sendNotification'],
  ['SendLimits', 'sendNotification.limits'],
  ['SendResult', 'sendNotification'],
  ['DeliveryCounts', 'getNotification.counts'],
  ['LastDelivery', 'getNotification.lastDelivery'],
  ['Notification', 'getNotification'],
  ['RecipientStatus', 'listNotificationRecipients.data[].status'],
  ['Recipient', 'listNotificationRecipients.data[]'],
  ['RecipientPage', 'listNotificationRecipients'],
  // ---- Subscribers ----
  ['SubscriberStatus', 'listSubscribers.data[].status'],
  ['Subscriber', 'listSubscribers.data[]'],
  ['SubscriberDelivery', 'getSubscriber.delivery'],
  ['SubscriberDevice', 'getSubscriber.device'],
  ['SubscriberDetail', 'getSubscriber'],
  ['SubscriberPage', 'listSubscribers'],
  ['SubscriberCounts', 'countSubscribers'],
  ['SubscriberUpdate', 'body:updateSubscriber'],
  // ---- Campaigns and templates ----
  ['CampaignStatus', 'getCampaign.status'],
  ['Campaign', 'getCampaign'],
  ['CampaignPage', 'listCampaigns'],
  ['CreateCampaignRequest', 'body:createCampaign'],
  ['CampaignUpdate', 'body:updateCampaign'],
  ['CampaignStats', 'getCampaignStats'],
  ['CampaignStatsSeries', 'getCampaignStatsSeries'],
  ['Template', 'getTemplate'],
  ['TemplatePage', 'listTemplates'],
  ['CreateTemplateRequest', 'body:createTemplate'],
  ['TemplateUpdate', 'body:updateTemplate'],
  // ---- Segments ----
  ['SegmentTags', 'getSegment.filter.tags'],
  ['SegmentFilter', 'getSegment.filter'],
  ['Segment', 'getSegment'],
  ['SegmentPage', 'listSegments'],
  ['CreateSegmentRequest', 'body:createSegment'],
  ['SegmentUpdate', 'body:updateSegment'],
  ['SegmentCount', 'countSegment'],
  // ---- Flows ----
  ['FlowStatus', 'getFlow.status'],
  ['TriggerType', 'getFlow.triggerType'],
  ['RunState', 'listFlowRuns.data[].state'],
  ['StepInput', 'body:createFlow.steps[]'],
  ['FlowStep', 'getFlow.steps[]'],
  ['Flow', 'getFlow'],
  ['FlowPage', 'listFlows'],
  ['CreateFlowRequest', 'body:createFlow'],
  ['FlowUpdate', 'body:updateFlow'],
  ['FlowRun', 'listFlowRuns.data[]'],
  ['FlowRunPage', 'listFlowRuns'],
  // ---- Policy ----
  ['Scalar', 'body:authorize.parameters{}'],
  ['AuthorizeRequest', 'body:authorize'],
  ['VerdictName', 'authorize.verdict'],
  ['Verdict', 'authorize'],
  ['PolicyDocument', 'getPolicy'],
  ['PolicyChanger', 'listPolicyVersions.data[].changedBy'],
  ['PolicyVersion', 'listPolicyVersions.data[]'],
  ['PolicyVersionPage', 'listPolicyVersions'],
  ['PolicyVersionText', 'getPolicyVersion'],
  ['EvaluatePolicyRequest', 'body:evaluatePolicy'],
  ['PolicyEvaluation', 'evaluatePolicy'],
  // ---- Keys and enrollment ----
  ['BoundKey', 'listKeys.keys[]'],
  ['CreateKeyRequest', 'body:createKey'],
  ['CreatedKey', 'createKey'],
  ['Enrollment', 'createEnrollment'],
  ['Pairing', 'createPairing'],
  // ---- Questions: /ask and /decisions ----
  ['QuestionType', 'body:ask.type'],
  // A question without whom it reaches and how the call waits.
  ['Question', 'body:ask', ['wait', 'timeoutSeconds', 'subscriberIds', 'externalIds', 'tags']],
  ['AskRequest', 'body:ask'],
  ['AskRecord', 'getAsk'],
  ['AskPage', 'listAsks'],
  // A decision without its tool call and how the call waits: what authorize_then_decide takes.
  ['DecisionQuestion', 'body:createDecision', ['wait', 'timeoutSeconds', 'toolName', 'toolTarget', 'parameters']],
  ['DecisionRequest', 'body:createDecision'],
  ['Reachability', 'getDecision.reachability'],
  ['Decision', 'getDecision'],
  ['DecisionPage', 'listDecisions'],
  ['QuestionEvent', 'listDecisionEvents.data[]'],
  ['QuestionEventPage', 'listDecisionEvents'],
  ['PersonReachability', 'getReachability'],
  // ---- Webhooks ----
  ['WebhookSecret', 'getWebhookSecret'],
  ['IdentitySecret', 'getIdentitySecret'],
  // ---- Slack ----
  ['SlackConnection', 'getSlackConnection'],
  ['ConnectSlackRequest', 'body:connectSlack'],
];

const PYTHON_KEYWORDS = new Set(['False', 'None', 'True', 'and', 'as', 'assert', 'async', 'await', 'break', 'class', 'continue', 'def', 'del', 'elif', 'else', 'except', 'finally', 'for', 'from', 'global', 'if', 'import', 'in', 'is', 'lambda', 'nonlocal', 'not', 'or', 'pass', 'raise', 'return', 'try', 'while', 'with', 'yield']);

/** A Python literal of a JSON scalar. */
export const pythonLiteral = (value: string | number | boolean): string => (typeof value === 'boolean' ? (value ? 'True' : 'False') : JSON.stringify(value));

/** `#:` comment lines (Sphinx's attribute comments) of a description. */
export const pythonComment = (description: string | undefined, indent: string): string[] => (description ?? '').split('\n').filter(Boolean).map((line) => `${indent}#: ${line}`);

const pascal = (name: string): string => name.charAt(0).toUpperCase() + name.slice(1);

/** The module text: every name of NAMES, and the shapes inside them, in dependency order. */
export function pythonTypes(document: OpenApiDocument): string {
  /** What makes two shapes the same Python type: everything but descriptions and value bounds. */
  const shapeOf = (schema: Schema): unknown => {
    const s = resolve(document, schema);
    return {
      type: s.type,
      const: s.const,
      enum: s.enum,
      items: s.items && shapeOf(s.items),
      anyOf: s.anyOf?.map(shapeOf),
      properties: s.properties && Object.entries(s.properties).map(([name, property]) => [name, shapeOf(property)]),
      required: s.required && [...s.required].sort(),
      additionalProperties: typeof s.additionalProperties === 'object' ? shapeOf(s.additionalProperties) : s.additionalProperties,
    };
  };
  const keyOf = (schema: Schema): string => JSON.stringify(shapeOf(schema));

  const shapes = NAMES.map(([name, where, omit]) => {
    const schema = locate(document, where);
    if (!omit) return { name, schema };
    const properties = Object.fromEntries(Object.entries(schema.properties ?? {}).filter(([field]) => !omit.includes(field)));
    if (Object.keys(properties).length + omit.length !== Object.keys(schema.properties ?? {}).length) throw new Error(`${name}: ${where} lacks one of ${omit.join(', ')}`);
    return { name, schema: { ...schema, properties, required: schema.required?.filter((field) => !omit.includes(field)) } };
  });
  /** A name of a plain string or number is an alias, not the name of every string. */
  const shared = (schema: Schema): boolean => schema.properties !== undefined || schema.anyOf !== undefined || literals(document, schema) !== undefined;
  /** The first listed name of each shape. */
  const named = new Map<string, string>();
  for (const { name, schema } of shapes) if (shared(schema) && !named.has(keyOf(schema))) named.set(keyOf(schema), name);

  const blocks: string[] = [];
  const exported: string[] = [];
  const defined = new Map<string, string>(); // name -> key
  const imports = new Set<string>();

  /** Defines `name` as `schema` (once); the Python expression that names it. */
  const define = (name: string, schema: Schema, build: () => string[]): string => {
    const key = keyOf(schema);
    const existing = defined.get(name);
    if (existing !== undefined) {
      if (existing !== key) throw new Error(`two different shapes would be named ${name}: list one in NAMES`);
      return name;
    }
    defined.set(name, key);
    blocks.push(build().join('\n'));
    exported.push(name);
    return name;
  };

  /** The Python type of `schema`; `hint` names an object met for the first time. */
  const typeOf = (schema: Schema, hint: string): string => {
    const s = resolve(document, schema);
    const name = named.get(keyOf(s));
    const values = literals(document, s);
    if (values) {
      imports.add('Literal');
      const literal = `Literal[${values.map(pythonLiteral).join(', ')}]`;
      return name === undefined ? literal : define(name, s, () => [`${name} = ${literal}`]);
    }
    // `type: ["string", "null"]` is the union of the two.
    const alternatives = Array.isArray(s.type) ? s.type.map((type): Schema => ({ ...s, type })) : s.anyOf;
    if (alternatives) {
      const members = [...new Set(alternatives.map((member) => typeOf(member, hint)))];
      const union = [...members.filter((member) => member !== 'None'), ...members.filter((member) => member === 'None')].join(' | ');
      return name === undefined ? union : define(name, s, () => [`${name} = ${union}`]);
    }
    switch (s.type) {
      case 'string':
        return 'str';
      case 'integer':
        return 'int';
      case 'number':
        return 'float';
      case 'boolean':
        return 'bool';
      case 'null':
        return 'None';
      case 'array':
        if (!s.items) throw new Error(`${hint}: an array without items`);
        return `list[${typeOf(s.items, hint)}]`;
      case 'object':
        if (s.properties && Object.keys(s.properties).length > 0) return typedDict(name ?? hint, s);
        if (typeof s.additionalProperties === 'object' && Object.keys(s.additionalProperties).length > 0) return `dict[str, ${typeOf(s.additionalProperties, hint)}]`;
        imports.add('Any');
        return 'dict[str, Any]';
      default:
        throw new Error(`${hint}: no Python type for ${JSON.stringify(s)}`);
    }
  };

  const typedDict = (name: string, schema: Schema): string => {
    if (defined.has(name)) return define(name, schema, () => []);
    const properties = Object.entries(schema.properties ?? {});
    const required = new Set(schema.required ?? []);
    // The fewer marks the better: total=False marks the required fields, else the optional ones are marked.
    const total = properties.filter(([field]) => required.has(field)).length * 2 >= properties.length;
    const fields = properties.map(([field, property]) => {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(field) || PYTHON_KEYWORDS.has(field)) throw new Error(`${name}.${field} is no Python identifier`);
      const type = typeOf(property, name + pascal(field));
      const mark = total ? (required.has(field) ? '' : 'NotRequired') : required.has(field) ? 'Required' : '';
      if (mark) imports.add(mark);
      return [...pythonComment(resolve(document, property).description, '    '), `    ${field}: ${mark ? `${mark}[${type}]` : type}`];
    });
    imports.add('TypedDict');
    return define(name, schema, () => [
      `class ${name}(TypedDict${total ? '' : ', total=False'}):`,
      ...(schema.description ? [`    """${schema.description}"""`, ''] : []),
      ...fields.flat(),
    ]);
  };

  for (const { name, schema } of shapes) {
    const first = named.get(keyOf(schema));
    // Each listed object is a class of its own (IdentitySecret is no WebhookSecret, though they
    // are alike); a second name of an enumeration, or a name of a plain type, is an alias.
    if (first !== name && schema.properties) typedDict(name, schema);
    else if (first !== name) {
      const target = typeOf(schema, name);
      blocks.push(`${name} = ${target}`);
      exported.push(name);
    } else typeOf(schema, name);
  }

  return [
    '"""Generated by scripts/generate-api-types.ts from the gateway\'s OpenAPI document (npm run generate). Do not edit.',
    '',
    'The request and response shapes of Herald\'s server API; import them from herald_sdk.types."""',
    '',
    'from __future__ import annotations',
    '',
    `from typing import ${[...imports].sort().join(', ')}`,
    '',
    `__all__ = [${exported.map((name) => JSON.stringify(name)).join(', ')}]`,
    // Two blank lines around a class; aliases side by side.
    blocks.map((block, index) => (block.startsWith('class ') || blocks[index - 1]?.startsWith('class ') !== false ? `\n\n${block}` : block)).join('\n'),
    '',
  ].join('\n');
}
