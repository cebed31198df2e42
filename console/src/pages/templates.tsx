import { useQuery } from '@tanstack/react-query';
import type { Page, Template } from '@herald/sdk';

import { api } from '../api.js';
import { ErrorNote, Table, When } from '../ui.js';

/** Templates: the workspace's notification templates (name, title, body, link). */

export function TemplatesPage() {
  const templates = useQuery({ queryKey: ['templates'], queryFn: () => api<Page<Template>>('GET', '/templates?limit=100') });
  return (
    <>
      <ErrorNote error={templates.error} />
      {templates.data && templates.data.data.length === 0 ? <p>No template yet.</p> : null}
      {templates.data && templates.data.data.length > 0 ? (
        <Table caption="Templates" columns={['Template', 'Title', 'Body', 'Opens', 'Updated']}>
          {templates.data.data.map((template) => (
            <tr key={template.id}>
              <th scope="row">{template.name}</th>
              <td>{template.title}</td>
              <td>{template.body}</td>
              <td>{template.actionUrl ?? '–'}</td>
              <td>
                <When at={template.updatedAt} />
              </td>
            </tr>
          ))}
        </Table>
      ) : null}
    </>
  );
}
