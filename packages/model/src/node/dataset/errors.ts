/** Missing or unusable dataset input/output (message says which path and what to do). */
export class DatasetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DatasetError';
  }
}
