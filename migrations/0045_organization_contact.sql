-- An organization's contact address: where a production invitation of its
-- first console admin is mailed. Changed only by a change another admin
-- approves (production).
ALTER TABLE organizations ADD COLUMN contact_email TEXT;
