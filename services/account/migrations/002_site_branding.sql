-- What the browser SDK's public site endpoint shows (GET /api/v1/site/{slug}).
ALTER TABLE sites
  ADD COLUMN logo_url      text,
  ADD COLUMN primary_color text NOT NULL DEFAULT '#1f6feb',
  ADD COLUMN button_text   text NOT NULL DEFAULT 'Allow notifications';
