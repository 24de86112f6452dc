-- The compliance provider's last "wait" on an identity in onboarding: the
-- identity's version (updated_at) it was given and when to ask again. A
-- round reads only identities changed since (a submission or a lifecycle
-- change moves updated_at) or due again, not every identity in onboarding.
ALTER TABLE identities ADD COLUMN reviewed_version BIGINT;
ALTER TABLE identities ADD COLUMN review_after BIGINT;
CREATE INDEX identities_by_status ON identities (status, updated_at, id);
-- A round reads the checks of its page's submissions in one statement.
CREATE INDEX id_verification_checks_by_submission ON id_verification_checks (submission_id, created_at);
