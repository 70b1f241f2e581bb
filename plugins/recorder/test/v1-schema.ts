/**
 * The catalog tables exactly as the previous version of the recorder created them, before rows named the node
 * that recorded them (api_base): what the upgrade tests build by hand and then open with this version.
 */
/** The table as the previous version (schema version 1) created it, without api_base. */
export const SQLITE_V1_SCHEMA = `
CREATE TABLE IF NOT EXISTS stored_av (
  req_id    TEXT PRIMARY KEY,
  app_id    TEXT NOT NULL,
  sim_no    TEXT NOT NULL,
  chan      INTEGER NOT NULL,
  live      INTEGER NOT NULL,
  req_tm    INTEGER NOT NULL,
  path      TEXT NOT NULL,
  ext       TEXT NOT NULL,
  sz        INTEGER NOT NULL DEFAULT 0,
  media_typ TEXT,
  state     TEXT NOT NULL,
  end_tm    INTEGER,
  error     TEXT
);
CREATE INDEX IF NOT EXISTS stored_av_app_tm ON stored_av (app_id, req_tm, req_id, state);
CREATE INDEX IF NOT EXISTS stored_av_app_sim_tm ON stored_av (app_id, sim_no, req_tm, req_id, state);
CREATE INDEX IF NOT EXISTS stored_av_unfinished ON stored_av (req_tm, req_id) WHERE state = 'recording';
CREATE INDEX IF NOT EXISTS stored_av_finished ON stored_av (req_tm, req_id) WHERE state <> 'recording';
`;

/** The table as the previous version created it (no api_base). */
export function pgV1Schema(t: string): string {
  return `
CREATE TABLE ${t} (
  req_id    text COLLATE "C" PRIMARY KEY,
  app_id    text COLLATE "C" NOT NULL,
  sim_no    text COLLATE "C" NOT NULL,
  chan      integer NOT NULL,
  live      boolean NOT NULL,
  req_tm    timestamptz NOT NULL,
  path      text NOT NULL,
  ext       text NOT NULL,
  sz        bigint NOT NULL DEFAULT 0,
  media_typ text,
  state     text NOT NULL CHECK (state IN ('recording', 'done', 'failed')),
  end_tm    timestamptz,
  error     text
);
CREATE INDEX ${t}_app_tm ON ${t} (app_id, req_tm, req_id, state);
CREATE INDEX ${t}_app_sim_tm ON ${t} (app_id, sim_no, req_tm, req_id, state);
CREATE INDEX ${t}_unfinished ON ${t} (req_tm, req_id) WHERE state = 'recording';
CREATE INDEX ${t}_finished ON ${t} (req_tm, req_id) WHERE state <> 'recording';
`;
}
