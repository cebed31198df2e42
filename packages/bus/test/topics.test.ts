import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { readComponents, repositoryRoot } from '@herald/components';

import { allTopics, answerChannel, consumers, deadLetterOf, questionOfAnswerChannel, questionsChannel, redisChannels, renderTopicsFile, topics, workspaceOfQuestionsChannel } from '../src/index.js';

// The Kafka contract (src/topics.ts) is the one list of topics: what deploy/infra.sh creates is
// generated from it, and every producer and consumer it names is a component that uses Kafka.

test('deploy/kafka/topics.txt is what the declarations generate (npm run generate)', () => {
  assert.equal(readFileSync(`${repositoryRoot}deploy/kafka/topics.txt`, 'utf8'), renderTopicsFile());
});

test('every topic has its own dead-letter topic, and names are unique', () => {
  const names = allTopics.flatMap((declared) => [declared.name, declared.deadLetter]);
  assert.equal(new Set(names).size, names.length);
  for (const declared of allTopics) assert.equal(deadLetterOf(declared.name), `${declared.name}.dlq`);
  assert.throws(() => deadLetterOf('herald.nowhere'), /herald.nowhere is not a declared topic/);
});

test('producers and consumer groups are components of the registry that use Kafka', () => {
  const usingKafka = new Set(readComponents().filter((component) => component.uses.includes('kafka')).map((component) => component.name));
  for (const declared of allTopics) assert.ok(usingKafka.has(declared.producer), `${declared.name}: producer ${declared.producer} does not use kafka in charts/herald/values.yaml`);
  for (const consumer of Object.values(consumers)) assert.ok(usingKafka.has(consumer.component), `${consumer.group}: ${consumer.component} does not use kafka in charts/herald/values.yaml`);
  const groups = Object.values(consumers).map((consumer) => consumer.group);
  assert.equal(new Set(groups).size, groups.length);
});

test('the Redis channels: producers and consumers are registry components that use Redis; names carry the namespace', () => {
  const usingRedis = new Set(readComponents().filter((component) => component.uses.includes('redis')).map((component) => component.name));
  for (const [name, channel] of Object.entries(redisChannels)) {
    for (const component of [channel.producer, ...channel.consumers]) assert.ok(usingRedis.has(component), `${name}: ${component} does not use redis in charts/herald/values.yaml`);
  }
  assert.equal(answerChannel('t1.', 'dec_1'), 't1.herald:answered:dec_1');
  assert.equal(answerChannel('', 'dec_1'), 'herald:answered:dec_1');
  assert.equal(questionOfAnswerChannel('t1.', 't1.herald:answered:dec_1'), 'dec_1');
  assert.equal(questionsChannel('t1.', 'ws_1'), 't1.herald:questions:ws_1');
  assert.equal(workspaceOfQuestionsChannel('t1.', 't1.herald:questions:ws_1'), 'ws_1');
  assert.equal(workspaceOfQuestionsChannel('t1.', 't1.herald:answered:dec_1'), undefined);
});

test('every declared message type is a message of the .proto contracts', () => {
  for (const declared of allTopics) {
    const [, service, version, message] = /^herald\.(\w+)\.(v\d+)\.(\w+)$/.exec(declared.messageType) ?? [];
    assert.ok(message, `${declared.name}: ${declared.messageType} is not herald.<service>.<version>.<Message>`);
    const protoFiles = ['events.proto', `${service}.proto`].map((file) => `${repositoryRoot}proto/herald/${service}/${version}/${file}`);
    const declaring = protoFiles.filter((file) => {
      try {
        return new RegExp(`^message ${message} \\{`, 'm').test(readFileSync(file, 'utf8'));
      } catch {
        return false;
      }
    });
    assert.equal(declaring.length, 1, `${declared.messageType} is declared in none of ${protoFiles.join(', ')}`);
  }
  assert.equal(topics.deliveryJobs.messageType, 'herald.delivery.v1.DeliveryJob');
});
