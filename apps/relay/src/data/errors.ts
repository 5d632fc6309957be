/**
 * A dataset the relay cannot serve: unknown name, missing or corrupt files, a run config that does not
 * match the prepared data. `code` is the API error code; `status` the HTTP status the routes answer with.
 */
export class DatasetError extends Error {
  readonly code: string;
  readonly status: 404 | 409 | 500;
  constructor(code: string, message: string, status: 404 | 409 | 500 = 500) {
    super(message);
    this.name = 'DatasetError';
    this.code = code;
    this.status = status;
  }
}
